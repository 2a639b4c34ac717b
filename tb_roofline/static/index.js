// Entry point TensorBoard loads into the plugin iframe (es_module_path = /index.js): it imports
// the module and calls render(). Everything else lives under ./static/ (served by the plugin at
// /data/plugin/roofline/static/<path>); relative URLs keep it working under --path_prefix.
import {start} from './static/app.js';

export async function render() {
  await start(document.body);
}
