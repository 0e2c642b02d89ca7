// The dashboard page (being built).
import '../shell/base.css';
import { config } from '../shell/config';
import { header } from '../shell/header';

document.body.append(header(config().path || '/'));
