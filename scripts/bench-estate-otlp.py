#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for bench-estate.py: `bench-estate-otlp.py OUT.json`.

Listens on 127.0.0.1 (a free port, printed on the first line of stdout), accepts
`POST /v1/traces` with protobuf bodies and decodes them with the official protobuf
definitions (the `opentelemetry-proto` package; bench-estate.py installs it). On
SIGTERM it writes, per trace: the root spans (no parent), the spans whose parent is a
root, and the orphans (a parent the trace does not hold), then exits.
"""
import gzip, http.server, json, signal, sys, threading
from collections import defaultdict

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

spans = defaultdict(dict)  # trace id -> span id -> parent span id
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = trace_service_pb2.ExportTraceServiceRequest()
        req.ParseFromString(body)
        with lock:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        spans[s.trace_id.hex()][s.span_id.hex()] = s.parent_span_id.hex()
        out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def summary():
    out = []
    with lock:
        for trace, ids in spans.items():
            roots = {s for s, p in ids.items() if not p}
            out.append({
                "trace_id": trace,
                "spans": len(ids),
                "roots": len(roots),
                "children": sum(1 for p in ids.values() if p in roots),
                "orphans": sum(1 for p in ids.values() if p and p not in ids),
            })
    return out


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)

    def stop(*_):
        with open(sys.argv[1], "w") as f:
            json.dump(summary(), f)
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()
