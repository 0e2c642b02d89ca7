# nbkube's kernel fork server (see forkserver.go and docs/local.md).
#
# It imports ipykernel once, then forks a child per request that runs ipykernel_launcher as
# `python3 -m ipykernel_launcher ...` would, with the request's argv, environment, working
# directory, umask and standard streams. A fork costs a few milliseconds where a new
# interpreter spends most of a second importing the same modules.
#
# fd 3 is a listening SOCK_SEQPACKET Unix socket (socket activation): the node made it and
# starts this server when a connection waits. A request is one message, JSON
# {"argv": [...], "env": [...], "cwd": ..., "umask": n} with stdin, stdout and stderr as
# SCM_RIGHTS. The answer is {"pid": n} or {"refused": why}; later {"exit": status} (the raw
# wait status) when the kernel ended. A connection closed before that kills the kernel's
# process group: its agent is gone. The server exits when it has had nothing to do for
# NBKUBE_FORK_SERVER_IDLE seconds.
import json
import os
import select
import selectors
import signal
import socket
import struct
import sys
import time

# The interpreter-wide settings an interpreter takes from its environment when it starts
# (or that the modules imported here read at import): a request whose environment sets any
# of them otherwise than this server's was started with gets a new interpreter instead.
STARTUP_PREFIXES = ("PYTHON", "LC_", "PYDEVD", "DEBUGPY")
STARTUP_NAMES = ("LANG", "LANGUAGE", "IDE_PROJECT_ROOTS", "LIBRARY_ROOTS")
MAX_REQUEST = 1 << 20
# How long a sandboxed kernel may take to join its pod's namespaces.
SANDBOX_TIMEOUT = 10

t0 = time.monotonic()
IDLE = float(os.environ.pop("NBKUBE_FORK_SERVER_IDLE", "600"))
# On a node that sandboxes its pods, every agent is in a sandbox: a request from this
# server's own namespaces could only come from a sandbox's connection whose process is gone.
SANDBOXED_ONLY = os.environ.pop("NBKUBE_FORK_SERVER_SANDBOXED_ONLY", "") == "1"
# When this server runs as root, each sandbox runs as a user of the machine of its own, from
# this range ("first:count"); agents of those users may connect, and only from a sandbox.
_ids = os.environ.pop("NBKUBE_FORK_SERVER_SANDBOX_IDS", "")
SANDBOX_IDS = range(int(_ids.split(":")[0]), sum(map(int, _ids.split(":")))) if _ids else range(0)
# SO_PEERPIDFD (Linux 6.5): a pidfd of the process that connected, whatever became of its PID.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def exec_environment():
    """The environment this process was started with, before the interpreter changed it (it
    sets LC_CTYPE when the locale is C, PEP 538)."""
    with open("/proc/self/environ", "rb") as f:
        pairs = [e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e]
    env = {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}
    env.pop("NBKUBE_FORK_SERVER_IDLE", None)
    env.pop("NBKUBE_FORK_SERVER_SANDBOXED_ONLY", None)
    return env


SERVER_ENV = exec_environment()
import ipykernel.kernelapp  # noqa: E402  (the point of this process)
import ipykernel.ipkernel  # noqa: E402,F401
import ipykernel.zmqshell  # noqa: E402,F401
import runpy  # noqa: E402
import site  # noqa: E402
import sysconfig  # noqa: E402

ctypes_prctl = None
try:
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
    ctypes_prctl = _libc.prctl
except (OSError, AttributeError):
    pass

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
# The namespaces of a sandboxed pod (internal/podns), in the order a process joins them: its
# user namespace first, which gives the capabilities to join the others; its PID namespace
# last, which takes effect for the children only.
CLONE_NEWPID = 0x20000000
NAMESPACES = (("user", 0x10000000), ("mnt", 0x00020000), ("ipc", 0x08000000),
              ("uts", 0x04000000), ("net", 0x40000000), ("pid", CLONE_NEWPID))
# What the interpreter's start and the imports set in the environment (LC_CTYPE, ipykernel's
# debugger sets PYDEVD_USE_FRAME_EVAL): a new interpreter started with the same settings
# would have set it in its environment too.
IMPORTS_SET = {k: v for k, v in os.environ.items() if SERVER_ENV.get(k) != v}
EXECUTABLE = os.path.realpath(sys.executable)


def log(msg):
    print("nbkube fork server: " + msg, file=sys.stderr, flush=True)


def startup_env(env):
    return {k: v for k, v in env.items() if k.startswith(STARTUP_PREFIXES) or k in STARTUP_NAMES}


def user_site(env):
    """The user site-packages directory an interpreter started with env would add."""
    home = env.get("HOME", "")
    base = env.get("PYTHONUSERBASE") or (os.path.join(home, ".local") if home else "")
    if not base:
        return "", ""
    ver = sys.version_info
    return base, os.path.join(base, "lib", "python%d.%d" % ver[:2], "site-packages")


def refusal(req):
    """Why req cannot be a fork of this interpreter, or None when it can."""
    argv = req.get("argv")
    if not isinstance(argv, list) or len(argv) < 3 or not all(isinstance(a, str) for a in argv):
        return "not a command line"
    if os.path.realpath(argv[0]) != EXECUTABLE:
        return "another interpreter: %s, this server runs %s" % (argv[0], EXECUTABLE)
    if argv[1:3] != ["-m", "ipykernel_launcher"]:
        return "not `python -m ipykernel_launcher`"
    env = req.get("env")
    if not isinstance(env, list) or not all(isinstance(e, str) and "=" in e for e in env):
        return "no environment"
    env = dict(e.split("=", 1) for e in env)
    if startup_env(env) != startup_env(SERVER_ENV):
        return "its environment sets the interpreter up otherwise (PYTHON*, LANG, LC_*)"
    if site.ENABLE_USER_SITE:
        _, user = user_site(env)
        if user and os.path.isdir(user):
            return "its home has user site-packages (%s)" % user
    if not isinstance(req.get("cwd"), str) or not isinstance(req.get("umask"), int):
        return "no working directory or umask"
    return None


def peer_pidfd(conn, pid):
    """A pidfd of the process that connected conn: the kernel's own (SO_PEERPIDFD), else one
    opened now, right after the accept, of the PID the credentials name."""
    try:
        return conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return os.pidfd_open(pid)


def exited(pidfd):
    """Whether the process of pidfd has ended (its pidfd reads ready then)."""
    ready, _, _ = select.select([pidfd], [], [], 0)
    return bool(ready)


def peer_namespaces(pid, pidfd):
    """The namespaces of the agent at pid that are not this server's, opened: an agent in a
    sandbox gets a kernel in its sandbox, whatever it asks. They come from the peer's
    credentials, which the kernel vouches for, never from the request; and from the process
    that connected only: pidfd is that process's, which must still run once they are open,
    so that a PID another process took since (an agent that connected, then ended) names
    nothing."""
    opened = []
    try:
        for name, flag in NAMESPACES:
            mine = os.stat("/proc/self/ns/" + name)
            path = "/proc/%d/ns/%s" % (pid, name)
            theirs = os.stat(path)
            if (theirs.st_dev, theirs.st_ino) != (mine.st_dev, mine.st_ino):
                opened.append((os.open(path, os.O_RDONLY | os.O_CLOEXEC), flag))
        if exited(pidfd):
            raise OSError("the process that connected has ended")
    except OSError:
        for fd, _ in opened:
            os.close(fd)
        raise
    return opened


def inside_id(pid, kind, outside):
    """The ID inside the user namespace of the process pid that the machine's ID outside is:
    the user or group (kind "uid" or "gid") the agent runs as there."""
    with open("/proc/%d/%s_map" % (pid, kind)) as f:
        for line in f:
            first, lower, count = map(int, line.split())
            if lower <= outside < lower + count:
                return first + outside - lower
    raise OSError("its %s %d is not mapped in its sandbox" % (kind, outside))


def drop_capabilities():
    """Gives up what joining a user namespace gave: every capability in it, for good."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    if _libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def become_sandboxed(req, fds, closing, namespaces, ids, report, in_pid_ns):
    """In the child: join the agent's sandbox as the agent's user and group there (ids), fork
    the kernel there (a child is needed to be in its PID namespace), tell the server the
    kernel's PID as the agent sees it (or why not) on report, then wait for the kernel and end
    as it did, so that the server reports its status. A child forked in the sandbox's PID
    namespace already (in_pid_ns) becomes the kernel itself."""
    for f in closing:
        f.close() if hasattr(f, "close") else os.close(f)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setpgid(0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    pid = -1
    try:
        for fd, flag in namespaces:
            if not (in_pid_ns and flag == CLONE_NEWPID) and _libc.setns(fd, flag) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            os.close(fd)
        uid, gid = ids
        if os.getuid() != uid:
            # A sandbox of a user of the machine of its own: this server's user is not its.
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        why = inside_refusal(req)
        if why is None and in_pid_ns:
            pid = 0
            drop_capabilities()
            os.write(report, b"P%d" % os.getpid())
            os.close(report)
        elif why is None:
            pid = os.fork()
            if pid == 0:
                drop_capabilities()
                os.write(report, b"P%d" % os.getpid())
                os.close(report)
    except OSError as e:
        why = "joining the pod's sandbox: %s" % e
    if why is None and pid == 0:
        become_kernel(req, fds, [])
    if why is not None:
        os.write(report, b"R" + why.encode())
        os._exit(0)
    os.close(report)
    for fd in fds:
        os.close(fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


# This server's own PID namespace, to come back to after forking into a sandbox's (root only);
# None where it cannot.
OWN_PID_NS = None
if os.geteuid() == 0:
    try:
        OWN_PID_NS = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        pass


def enter_pid_namespace(namespaces):
    """As root, makes the sandbox's PID namespace that of this server's next child (setns of a
    PID namespace moves the children only), so that the kernel is forked into it at once: one
    fork of this large process, not two. Whether it did; an ordinary user cannot (it needs
    CAP_SYS_ADMIN in this server's own user namespace) and forks twice."""
    pid_ns = next((fd for fd, flag in namespaces if flag == CLONE_NEWPID), None)
    if OWN_PID_NS is None or pid_ns is None or ctypes_prctl is None:
        return False
    return _libc.setns(pid_ns, CLONE_NEWPID) == 0


def leave_pid_namespace():
    """Makes this server's children its own PID namespace's again, or ends it: a server whose
    next child would be forked into a sandbox must not serve."""
    if _libc.setns(OWN_PID_NS, CLONE_NEWPID) != 0:
        log("cannot leave a sandbox's PID namespace: %s" % os.strerror(ctypes.get_errno()))
        os._exit(1)


def inside_refusal(req):
    """Why req cannot be forked, found where the kernel will run (the agent's home and
    working directory are the sandbox's)."""
    if site.ENABLE_USER_SITE:
        _, user = user_site(dict(e.split("=", 1) for e in req["env"]))
        if user and os.path.isdir(user):
            return "its home has user site-packages (%s)" % user
    return None


def become_kernel(req, fds, closing):
    """In the child: take the request's process state and run ipykernel_launcher. It never
    returns: the kernel's end (SystemExit, or an exception) unwinds this process as it would
    a new interpreter's, running its atexit handlers (IPython's history, the user's) and
    exiting with the kernel's status."""
    for f in closing:
        f.close() if hasattr(f, "close") else os.close(f)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setpgid(0, 0)
    if ctypes_prctl is not None:
        # Dies with this server (which dies with nbkube), as a child of its agent would.
        ctypes_prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    env = dict(e.split("=", 1) for e in req["env"])
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(IMPORTS_SET)
    os.umask(req["umask"])
    os.chdir(req["cwd"])
    time.tzset()
    # What the interpreter and the modules imported above took from this server's
    # environment, taken again from the kernel's.
    site.USER_BASE, site.USER_SITE = user_site(env)
    if sysconfig._CONFIG_VARS is not None and site.USER_BASE:
        sysconfig._CONFIG_VARS["userbase"] = site.USER_BASE
    jedi_settings = sys.modules.get("jedi.settings")
    if jedi_settings is not None:
        xdg = env.get("XDG_CACHE_HOME")
        cache = os.path.join(xdg, "jedi") if xdg else os.path.join(env.get("HOME", "~"), ".cache", "jedi")
        jedi_settings.cache_directory = os.path.expanduser(cache)
    import tempfile

    tempfile.tempdir = None
    # `python -m` puts the working directory first on the path.
    sys.path[0] = os.getcwd()
    sys.argv = [req["argv"][0]] + req["argv"][3:]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
    sys.exit(0)


def main():
    listener = socket.socket(fileno=3)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel.register(listener, selectors.EVENT_READ, "listen")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    conns = {}  # socket -> child pid (None before it forked)
    children = {}  # pid -> socket
    peers = {}  # socket -> the agent's PID, a pidfd of it, its user and group on the machine
    idle_since = time.monotonic()
    log("ready in %.2f s" % (time.monotonic() - t0))

    def server_files():
        """What a child closes: this server's descriptors."""
        own = [OWN_PID_NS] if OWN_PID_NS is not None else []
        return [listener, *conns.keys(), sel, wake_r, wake_w, *own]

    def send(conn, msg):
        try:
            conn.send(json.dumps(msg).encode())
        except OSError:
            pass

    def drop(conn):
        peer = peers.pop(conn, None)
        if peer is not None:
            os.close(peer[1])
        pid = conns.pop(conn, None)
        sel.unregister(conn)
        conn.close()
        if pid is not None and pid in children:
            # The agent is gone: so is its kernel.
            del children[pid]
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass

    def serve(conn):
        try:
            msg, fds, flags, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
        except OSError:
            drop(conn)
            return
        if conns.get(conn) is not None or not msg:
            # A running kernel's agent said something (or hung up): only hanging up counts.
            for fd in fds:
                os.close(fd)
            if not msg:
                drop(conn)
            return
        try:
            req = json.loads(msg)
            why = "file descriptors missing" if len(fds) != 3 else refusal(req)
        except ValueError:
            why = "not JSON"
        if why is not None or flags & socket.MSG_TRUNC:
            for fd in fds:
                os.close(fd)
            send(conn, {"refused": why or "request too large"})
            drop(conn)
            return
        why = None
        try:
            peer, pidfd, uid, gid = peers[conn]
            ids = (inside_id(peer, "uid", uid), inside_id(peer, "gid", gid))
            namespaces = peer_namespaces(peer, pidfd)
            if not namespaces and (SANDBOXED_ONLY or uid != os.getuid()):
                why = "this node runs kernels in their pods' sandboxes only"
        except OSError as e:
            # Said without the host's paths or PIDs, which are none of the sandbox's business.
            why = "the agent's namespaces: %s" % (e.strerror or e)
        if why is not None:
            for fd in fds:
                os.close(fd)
            send(conn, {"refused": why})
            drop(conn)
            return
        if namespaces:
            fork_sandboxed(conn, req, fds, namespaces, ids)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            become_kernel(req, fds, server_files())
        # The child does it too; whichever comes first, a kill of its group right after this
        # reaches it.
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        conns[conn] = pid
        children[pid] = conn
        send(conn, {"pid": pid})

    def fork_sandboxed(conn, req, fds, namespaces, ids):
        report_r, report_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        in_pid_ns = enter_pid_namespace(namespaces)
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            become_sandboxed(req, fds, server_files(),
                             namespaces, ids, report_w, in_pid_ns)
        if in_pid_ns:
            leave_pid_namespace()
        os.close(report_w)
        for fd, _ in namespaces:
            os.close(fd)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        answer = b""
        ready, _, _ = select.select([report_r], [], [], SANDBOX_TIMEOUT)
        if ready:
            answer = os.read(report_r, 4096)
        os.close(report_r)
        if answer.startswith(b"P"):
            conns[conn] = pid
            children[pid] = conn
            send(conn, {"pid": int(answer[1:])})
            return
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        why = answer[1:].decode(errors="replace") if answer else "no kernel came up in the pod's sandbox"
        send(conn, {"refused": why})
        drop(conn)

    def reap():
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is not None:
                send(conn, {"exit": status})
                conns[conn] = None
                drop(conn)

    while True:
        timeout = None
        if conns or children:
            idle_since = time.monotonic()
        else:
            timeout = idle_since + IDLE - time.monotonic()
            if timeout <= 0:
                log("idle, exiting")
                return
        events = sel.select(timeout)
        for key, _ in events:
            if key.data == "listen":
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                peer, uid, gid = struct.unpack("3i", creds)
                if uid != os.getuid() and uid not in SANDBOX_IDS:
                    conn.close()
                    continue
                try:
                    pidfd = peer_pidfd(conn, peer)
                except OSError:
                    conn.close()
                    continue
                conn.setblocking(True)
                conns[conn] = None
                peers[conn] = (peer, pidfd, uid, gid)
                sel.register(conn, selectors.EVENT_READ, "conn")
            elif key.data == "wake":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                reap()
            else:
                serve(key.fileobj)


if __name__ == "__main__":
    main()
