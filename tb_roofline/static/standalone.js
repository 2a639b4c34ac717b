// Entry point of the page `tb-roofline serve` opens at `/` (static/standalone.html): the same
// module TensorBoard loads into its plugin frame. The API sits at the server's root, which is
// where api.js looks (one level above static/), so nothing else differs from the plugin.
import {render} from '../index.js';

render();
