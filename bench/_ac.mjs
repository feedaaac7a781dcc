import autocannon from 'autocannon';
let n = 0;
const r = await autocannon({ url: `http://127.0.0.1:${process.env.PORT}/notify`, connections: Number(process.env.C ?? 50), duration: Number(process.env.D ?? 10),
  requests: [{ method: 'POST', headers: { authorization: 'Bearer bench-key-0123456789abcdef0123456789abcdef', 'content-type': 'application/json' },
    setupRequest: (req) => ({ ...req, body: JSON.stringify({ userId: `u${process.pid}-${n++}`, payload: { title: 'Hello', body: 'from the benchmark' } }) }) }] });
console.log(Math.round(r.requests.average), 'req/s', JSON.stringify(r.statusCodeStats));
