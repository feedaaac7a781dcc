// Loaded into each app the one-terminal stack starts (`node --import <this file> <app>`, see stack.mjs).
// The app runs in a process group of its own, out of reach of the terminal's Ctrl+C, with an IPC channel
// to the launcher: when the launcher is gone without having stopped it (killed with SIGKILL, say), the
// channel closes and the app shuts down as on SIGTERM instead of running on alone.
if (process.channel) {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  // The channel alone does not keep the app running.
  process.channel.unref();
}
