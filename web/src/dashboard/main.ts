// The dashboard: a directory's files (with breadcrumbs, new notebook and folder, uploads,
// rename, copy, delete), new terminal, the running notebooks and terminals and the clusters,
// kept up to date by polling.
import '../shell/base.css';
import './dashboard.css';
import { ServerConnection, type Session } from '@jupyterlab/services';
import { config, editURL, fileURL, filesURL, notebookURL, terminalURL, treeURL, url } from '../shell/config';
import { h } from '../shell/dom';
import { header } from '../shell/header';
import { markReady, markRendered } from '../shell/ready';
import { api, services } from '../shell/server';
import { listTerminals, shutDownTerminal, startTerminal } from '../shell/terminals';
import { UploadProgress, Toolbar } from './actions';
import { Alerts, errorText } from './alerts';
import { Clusters, NewCluster, mayMakeClusters, type Cluster, type Me } from './clusters';
import { confirmDialog } from './dialogs';
import { Listing, type Entry } from './listing';
import { breadcrumbs, badName, baseName, joinPath, parentDir } from './paths';
import { Poller } from './poll';
import { Running } from './running';
import { newTerminalButton, openNewTerminal, RunningTerminals } from './terminals';
import { uploadFile } from './upload';

const POLL_MS = 5000;

const cfg = config();
const dir = cfg.path.replace(/^\/+|\/+$/g, '');
const manager = services();
const alerts = new Alerts();

document.title = `${dir === '' ? 'Home' : baseName(dir)} – nbkube`;

// Answers to requests made before the last action finished are stale (the action may have
// renamed, deleted or shut down what they show): each action starts a new epoch, and polls
// drop what they asked for in an older one.
let epoch = 0;
function actionDone(): Promise<void> {
  epoch++;
  return poller.refresh();
}

async function act<T>(what: string, f: () => Promise<T>): Promise<T | undefined> {
  try {
    const r = await f();
    alerts.clear();
    return r;
  } catch (err) {
    alerts.show(err, what);
    return undefined;
  } finally {
    void actionDone();
  }
}

// ----- the listing

const listing = new Listing(
  dir,
  {
    dir: treeURL,
    notebook: notebookURL,
    file: fileURL,
    download: (p) => filesURL(p, true),
  },
  {
    async rename(path, newName) {
      const why = badName(newName);
      if (why) {
        alerts.show(why, `Cannot rename ${baseName(path)}`);
        return undefined;
      }
      const target = joinPath(parentDir(path), newName);
      const model = await act(`Cannot rename ${baseName(path)}`, () => manager.contents.rename(path, target));
      return model?.path;
    },
    copy(path) {
      void act(`Cannot copy ${baseName(path)}`, () => manager.contents.copy(path, dir)).then((m) => {
        if (m) {
          // The copy is a new row after the next refresh: put the focus on it.
          void poller.refresh().then(() => listing.focusRow(m.path));
        }
      });
    },
    delete(path, type) {
      const name = baseName(path);
      void confirmDialog({
        title: `Delete ${name}?`,
        message:
          type === 'directory'
            ? `The folder ${name} will be deleted. This cannot be undone.`
            : `${name} will be deleted. This cannot be undone.`,
        confirm: 'Delete',
        danger: true,
      }).then(async (ok) => {
        if (!ok) {
          return;
        }
        // The focus goes to the next row (or the one before) rather than to the page.
        const paths = listing.paths();
        const i = paths.indexOf(path);
        const next = paths[i + 1] ?? paths[i - 1];
        await act(`Cannot delete ${name}`, () => manager.contents.delete(path));
        await poller.refresh();
        if (next && listing.row(next)) {
          listing.focusRow(next);
        }
      });
    },
  },
);

let runningPaths = new Set<string>();
let listed = false;
let listingFailed = false;

async function loadListing(): Promise<void> {
  const asked = epoch;
  try {
    const model = await manager.contents.get(dir, { content: true });
    if (asked !== epoch) {
      return;
    }
    if (model.type !== 'directory') {
      alerts.show(`${dir} is not a folder.`, '', 'listing');
      return;
    }
    const t0 = performance.now();
    listing.update(model.content as Entry[], runningPaths);
    if (!listed) {
      // The rows are in and take input: the page is rendered (and how long the rows took).
      listed = true;
      performance.measure('nbkube-dashboard-rows', { start: t0 });
      markRendered('dashboard');
    }
    listingFailed = false;
    alerts.ok('listing');
  } catch (err) {
    listingFailed = true;
    alerts.show(err, dir === '' ? 'Cannot list your files' : `Cannot list ${dir}`, 'listing');
  }
}

// ----- running notebooks

const running = new Running(notebookURL, {
  shutdown(id, path) {
    void act(`Cannot shut down ${path}`, () => manager.sessions.shutdown(id));
  },
});

async function loadSessions(): Promise<void> {
  const asked = epoch;
  try {
    // One GET of the sessions: the session manager's own refresh waits for its poll's tick.
    const sessions = await api<Session.IModel[]>('api/sessions');
    if (asked !== epoch) {
      return;
    }
    running.update(sessions);
    runningPaths = new Set(sessions.map((s) => s.path));
    listing.setRunning(runningPaths);
    alerts.ok('sessions');
  } catch (err) {
    alerts.show(err, 'Cannot list the running notebooks', 'sessions');
  }
}

// ----- terminals

const terminals = new RunningTerminals(terminalURL, {
  shutdown(name) {
    void act(`Cannot shut down terminal ${name}`, () => shutDownTerminal(name));
  },
});
const newTerminal = newTerminalButton(() => {
  void act('Cannot start a terminal', () => openNewTerminal(() => startTerminal(dir), terminalURL));
});
newTerminal.hidden = !cfg.terminalsAvailable;

async function loadTerminals(): Promise<void> {
  if (!cfg.terminalsAvailable) {
    return; // a server without terminals: nothing to ask for, nothing shown
  }
  const asked = epoch;
  try {
    const list = await listTerminals();
    if (asked !== epoch) {
      return;
    }
    // undefined: a 404, which is how a server without terminals answers: neither the table nor
    // the button shows.
    terminals.update(list);
    newTerminal.hidden = list === undefined;
    alerts.ok('terminals');
  } catch (err) {
    alerts.show(err, 'Cannot list the running terminals', 'terminals');
  }
}

// ----- clusters

const clusters = new Clusters({
  start(profile, n) {
    void act(`Cannot start ${profile}`, () =>
      api<Cluster>(`api/clusters/${encodeURIComponent(profile)}/start`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ n }),
      }),
    );
  },
  stop(profile) {
    void act(`Cannot stop ${profile}`, () =>
      api<Cluster>(`api/clusters/${encodeURIComponent(profile)}/stop`, { method: 'POST' }),
    );
  },
  remove(profile) {
    void confirmDialog({
      title: `Delete cluster ${profile}?`,
      message: 'Its controller and engines stop, and whatever they hold in memory is lost.',
      confirm: 'Delete',
      danger: true,
    }).then((yes) => {
      if (yes) {
        void act(`Cannot delete ${profile}`, () =>
          api<void>(`api/clusters/${encodeURIComponent(profile)}`, { method: 'DELETE' }),
        );
      }
    });
  },
});
const newCluster = new NewCluster(
  async (profile, n, framework) =>
    (await act(`Cannot create ${profile}`, () =>
      api<Cluster>('api/clusters', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ profile, n, framework }),
      }),
    )) !== undefined,
);
// Shown to a user who may start clusters: one whose policies leave engines (/api/me).
newCluster.element.hidden = true;
const clustersSection = h(
  'section',
  { class: 'nb-section nb-clusters', 'aria-labelledby': 'nb-clusters-title' },
  h('h2', { id: 'nb-clusters-title' }, 'Clusters'),
  clusters.element,
  newCluster.element,
);

async function loadMayMakeClusters(): Promise<void> {
  try {
    const me = await api<Me>('api/me');
    newCluster.element.hidden = !mayMakeClusters(me);
  } catch {
    // Without an answer, no form: a start would tell the same error.
    newCluster.element.hidden = true;
  }
}

async function loadClusters(): Promise<void> {
  const asked = epoch;
  try {
    const list = await api<Cluster[]>('api/clusters');
    if (asked !== epoch) {
      return;
    }
    clusters.update(list);
    clustersSection.hidden = false;
    alerts.ok('clusters');
  } catch (err) {
    if (
      err instanceof ServerConnection.ResponseError &&
      (err.response.status === 404 || err.response.status === 403) &&
      !listingFailed
    ) {
      // No clusters here for this user (the listing works, so the login does): no section.
      clustersSection.hidden = true;
      alerts.ok('clusters');
      return;
    }
    alerts.show(err, 'Cannot list the clusters', 'clusters');
  }
}

// ----- the toolbar and uploads

const uploads = h('ul', { class: 'nb-uploads', 'aria-label': 'Uploads' });
uploads.hidden = true;

async function upload(files: File[]): Promise<void> {
  const names = listing.names();
  for (const file of files) {
    if (names.has(file.name)) {
      const replace = await confirmDialog({
        title: `Replace ${file.name}?`,
        message: `${file.name} already exists in this folder. Uploading will replace it.`,
        confirm: 'Replace',
        danger: true,
      });
      if (!replace) {
        continue;
      }
    }
    const line = new UploadProgress(file.name, file.size);
    uploads.hidden = false;
    uploads.append(line.element);
    try {
      await uploadFile(manager.contents, file, dir, (sent) => line.progress(sent));
      line.done();
      setTimeout(() => {
        line.element.remove();
        uploads.hidden = uploads.childElementCount === 0;
      }, 4000);
    } catch (err) {
      line.failed(errorText(err));
      alerts.show(err, `Cannot upload ${file.name}`);
    }
    void actionDone();
  }
}

const toolbar = new Toolbar(url('new'), dir, {
  newFolder() {
    void act('Cannot make a folder', () => manager.contents.newUntitled({ path: dir, type: 'directory' })).then(
      async (m) => {
        if (!m) {
          return;
        }
        await poller.refresh();
        listing.startRename(m.path);
      },
    );
  },
  newFile(ext) {
    void act('Cannot make a file', () => manager.contents.newUntitled({ path: dir, type: 'file', ext })).then((m) => {
      if (m) {
        // As a new notebook opens: in this tab, ready for typing.
        window.location.assign(editURL(m.path));
      }
    });
  },
  upload(files) {
    void upload(files);
  },
});
toolbar.element.append(newTerminal);

const specsLoaded = manager.kernelspecs.ready
  .then(() => toolbar.setKernelSpecs(manager.kernelspecs.specs))
  .catch((err) => alerts.show(err, 'Cannot list the kernels'));
manager.kernelspecs.specsChanged.connect((_, specs) => toolbar.setKernelSpecs(specs));

// ----- the page

function crumbs(): HTMLElement {
  const list = h('ol');
  const all = breadcrumbs(dir);
  all.forEach((c, i) => {
    const last = i === all.length - 1;
    list.append(h('li', {}, h('a', { href: treeURL(c.path), 'aria-current': last ? 'page' : undefined }, c.name)));
  });
  return h('nav', { class: 'nb-breadcrumbs', 'aria-label': 'Breadcrumbs' }, list);
}

const main = h(
  'main',
  { class: 'nb-dashboard', id: 'nb-main' },
  crumbs(),
  alerts.element,
  toolbar.element,
  uploads,
  h(
    'section',
    { class: 'nb-section nb-files', 'aria-labelledby': 'nb-files-title' },
    h('h2', { id: 'nb-files-title', class: 'nb-sr-only' }, 'Files'),
    listing.element,
  ),
  h(
    'section',
    { class: 'nb-section nb-running-section', 'aria-labelledby': 'nb-running-title' },
    h('h2', { id: 'nb-running-title' }, 'Running'),
    running.element,
    terminals.element,
  ),
  clustersSection,
);

document.body.append(header(dir === '' ? 'Home' : dir), main);

const poller = new Poller(async () => {
  await Promise.all([loadListing(), loadSessions(), loadTerminals(), loadClusters()]);
}, POLL_MS);

// Ready once the listing, sessions, terminals and clusters were shown (or their errors) and the Kernel
// select is filled, so that New notebook works.
// Whether the user may make clusters is asked once: policies change rarely.
void Promise.all([poller.start(), specsLoaded, loadMayMakeClusters()]).then(() => markReady('dashboard'));
