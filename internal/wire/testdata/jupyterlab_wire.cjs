// JupyterLab's side of wire_golden_test.go: what @jupyterlab/services (the client of JupyterLab
// 4) writes for a message in both WebSocket protocols, and what it reads from nbkube's
// encodings. Run by the Go test with node; NBKUBE_JS_MODULES is test/js/node_modules.
// Input on stdin, output on stdout, both JSON; bytes are base64:
//
//   in:  {"cases": [{"channel": str, "header": str, "parent_header": str, "metadata": str,
//         "content": str, "buffers": [b64], "ours": {"text": str|null, "binary": b64|null, "v1": b64}}]}
//   out: [{"v1": b64, "default": {"text": str} | {"binary": b64},
//          "read": {"text": msg|null, "binary": msg|null, "v1": msg}}]
//   where msg = {"channel", "msg_id"?, "msg_type"?, "header", "parent_header", "metadata",
//                "content" (each JSON.stringify'd), "buffers": [b64]}.
'use strict';
const path = require('path');
const modules = process.env.NBKUBE_JS_MODULES;
const { serialize, deserialize } = require(path.join(modules, '@jupyterlab/services/lib/kernel/serialize'));
const { supportedKernelWebSocketProtocols } = require(path.join(modules, '@jupyterlab/services/lib/kernel/messages'));
const v1 = supportedKernelWebSocketProtocols.v1KernelWebsocketJupyterOrg;

// A fresh ArrayBuffer of exactly the bytes: serialize writes a view's whole underlying buffer,
// and Node's Buffers share a pool.
const arrayBuffer = (b64) => new Uint8Array(Buffer.from(b64, 'base64')).buffer;
const b64 = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString('base64');

// serialize mutates the message (it deletes buffers), so every call gets a new one.
function message(c) {
  return {
    channel: c.channel,
    header: JSON.parse(c.header),
    parent_header: JSON.parse(c.parent_header),
    metadata: JSON.parse(c.metadata),
    content: JSON.parse(c.content),
    buffers: c.buffers.map(arrayBuffer),
  };
}

function describe(m, topLevel) {
  const out = {
    channel: m.channel,
    header: JSON.stringify(m.header),
    parent_header: JSON.stringify(m.parent_header),
    metadata: JSON.stringify(m.metadata),
    content: JSON.stringify(m.content),
    buffers: (m.buffers || []).map(b64),
  };
  if (topLevel) {
    out.msg_id = m.msg_id;
    out.msg_type = m.msg_type;
  }
  return out;
}

let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const results = JSON.parse(input).cases.map((c) => {
    const def = serialize(message(c));
    const read = {
      text: c.ours.text === null ? null : describe(deserialize(c.ours.text), true),
      binary: c.ours.binary === null ? null : describe(deserialize(arrayBuffer(c.ours.binary)), true),
      v1: describe(deserialize(arrayBuffer(c.ours.v1), v1), false),
    };
    return {
      v1: b64(new Uint8Array(serialize(message(c), v1))),
      default: typeof def === 'string' ? { text: def } : { binary: b64(new Uint8Array(def)) },
      read,
    };
  });
  process.stdout.write(JSON.stringify(results));
});
