// The operator dashboard page (dashboard.html): the admin API's snapshots, pushed every second.
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { Dashboard } from './dashboard.js';

const root = document.getElementById('dashboard');
if (root) render(<Dashboard />, root);
