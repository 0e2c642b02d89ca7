"""Jupyter's own side of wire_golden_test.go: what jupyter_client 7.4 and Jupyter Server 1.23
write for a message, and what they read from nbkube's encodings.

Run by the Go test with Debian's /usr/bin/python3 (which has jupyter_client and
jupyter_server); nothing is generated ahead of time, so the test always compares against the
installed implementations. Input on stdin, output on stdout, both JSON; bytes are base64:

  in:  {"key": str, "cases": [{"idents": [b64], "channel": str, "header": str,
        "parent_header": str, "metadata": str, "content": str, "buffers": [b64],
        "ours": {"zmq": [b64], "text": str|null, "binary": b64|null, "v1": b64}}]}
  out: [{"zmq": [b64],                           # Session.serialize + buffers
         "ws": {"text": str} | {"binary": b64},  # ZMQStreamHandler._reserialize_reply
         "v1": b64,                              # serialize_msg_to_ws_v1, as _on_zmq_reply
         "packed": [str] * 4,                     # Session.pack of the four dicts
         "read": {"zmq": msg, "text": msg|null, "binary": msg|null, "v1": msg}}]
  where msg = {"idents"?: [b64], "channel"?: str, "msg_id"?: ..., "msg_type"?: ...,
               "header": str, "parent_header": str, "metadata": str, "content": str,
               "buffers": [b64]} with the dicts re-dumped as JSON.
"""

import base64
import json
import sys
import types

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from jupyter_server.base.zmqhandlers import (
    ZMQStreamHandler,
    deserialize_binary_message,
    deserialize_msg_from_ws_v1,
    serialize_msg_to_ws_v1,
)


def b64(b):
    return base64.b64encode(bytes(b)).decode("ascii")


def unb64(s):
    return base64.b64decode(s)


def dump(obj):
    return json.dumps(obj, default=json_default)


def describe(msg, **extra):
    out = {k: dump(msg[k]) for k in ("header", "parent_header", "metadata", "content")}
    out["buffers"] = [b64(b) for b in msg.get("buffers", [])]
    out.update(extra)
    return out


def main():
    req = json.load(sys.stdin)
    key = req["key"].encode()
    results = []
    for case in req["cases"]:
        session = Session(key=key)
        msg = {k: json.loads(case[k]) for k in ("header", "parent_header", "metadata", "content")}
        idents = [unb64(i) for i in case["idents"]]
        frames = session.serialize(msg, ident=idents) + [unb64(b) for b in case["buffers"]]
        _, fed = session.feed_identities(frames)
        # As ZMQChannelsHandler._on_zmq_reply does before handing the message to its base class.
        handler = types.SimpleNamespace(session=session)
        ws = ZMQStreamHandler._reserialize_reply(handler, session.deserialize(fed), channel=case["channel"])
        result = {
            "zmq": [b64(f) for f in frames],
            "ws": {"binary": b64(ws)} if isinstance(ws, bytes) else {"text": ws},
            "v1": b64(serialize_msg_to_ws_v1(fed[1:], case["channel"])),
            "packed": [session.pack(msg[k]).decode() for k in ("header", "parent_header", "metadata", "content")],
        }

        ours = case["ours"]
        read = {}
        # A fresh Session: deserialize refuses a signature it has seen before.
        reader = Session(key=key)
        our_idents, our_fed = reader.feed_identities([unb64(f) for f in ours["zmq"]])
        read["zmq"] = describe(reader.deserialize(our_fed), idents=[b64(i) for i in our_idents])
        if ours["text"] is not None:
            m = json.loads(ours["text"])
            read["text"] = describe(m, channel=m.get("channel"), msg_id=m["msg_id"], msg_type=m["msg_type"])
        if ours["binary"] is not None:
            m = deserialize_binary_message(unb64(ours["binary"]))
            read["binary"] = describe(m, channel=m.get("channel"), msg_id=m["msg_id"], msg_type=m["msg_type"])
        channel, parts = deserialize_msg_from_ws_v1(unb64(ours["v1"]))
        names = ("header", "parent_header", "metadata", "content")
        m = {name: session.unpack(part) for name, part in zip(names, parts)}
        m["buffers"] = parts[len(names):]
        read["v1"] = describe(m, channel=channel)
        result["read"] = read
        results.append(result)
    json.dump(results, sys.stdout)


main()
