package main

// The kernel section of docs/benchmarks.md: its rows, their targets and the notes.

import (
	_ "embed" // floor.py
	"fmt"
	"strings"
	"time"
)

// kernelRow is one row of the kernel section: how a column shows its measurement, and whether
// nbkube meets the row's target.
type kernelRow struct {
	sc            kernelScenario
	title, target string
	cell          func(r, direct *kernelResults) string
	meets         func(nb, direct *kernelResults) bool
}

func kernelRows() []kernelRow {
	// ratio is "(1.05× direct)" when there is a direct measurement to compare with.
	ratio := func(direct *kernelResults, sc kernelScenario, v func(*kernelResults) time.Duration, r *kernelResults) string {
		if direct == nil || direct.errs[sc] != nil || r == direct {
			return ""
		}
		return fmt.Sprintf(" (%.2f× direct)", float64(v(r))/float64(v(direct)))
	}
	within := func(sc kernelScenario, v func(*kernelResults) time.Duration, limit float64) func(nb, direct *kernelResults) bool {
		return func(nb, direct *kernelResults) bool {
			return direct != nil && direct.errs[sc] == nil && float64(v(nb)) <= limit*float64(v(direct))
		}
	}
	startP50 := func(r *kernelResults) time.Duration { return p50(r.start) }
	rttP50 := func(r *kernelResults) time.Duration { return p50(r.roundTrip) }
	concurrent := func(r *kernelResults) time.Duration { return p50(r.concurrent) }
	return []kernelRow{
		{
			sc: scStart, title: fmt.Sprintf("kernel start: POST, WebSocket, kernel_info reply (p50 / max ms, %d starts)", kernelStarts), target: "p50 ≤ 1.1× direct",
			cell: func(r, d *kernelResults) string {
				return fmt.Sprintf("%.0f / %.0f%s", ms(p50(r.start)), ms(r.start[len(r.start)-1]), ratio(d, scStart, startP50, r))
			},
			meets: within(scStart, startP50, 1.1),
		},
		{
			sc: scRoundTrip, title: fmt.Sprintf("execute `1+1`: reply and idle (p50 / p99 ms, %d after %d)", roundTrips, roundTripWarmup), target: "p50 ≤ 1.3× direct",
			cell: func(r, d *kernelResults) string {
				return fmt.Sprintf("%.2f / %.2f%s", ms(p50(r.roundTrip)), ms(p99(r.roundTrip)), ratio(d, scRoundTrip, rttP50, r))
			},
			meets: within(scRoundTrip, rttP50, 1.3),
		},
		{
			sc: scStream, title: fmt.Sprintf("output stream: %d flushed prints (stream messages/s; messages, lines received, s)", streamLines), target: "–",
			cell: func(r, _ *kernelResults) string {
				s := r.stream
				return fmt.Sprintf("%.0f/s (%d msgs, %d lines, %.1f s)", float64(s.messages)/s.elapsed.Seconds(), s.messages, s.lines, s.elapsed.Seconds())
			},
		},
		{
			sc: scConcurrent, title: fmt.Sprintf("%d kernels started at once, until all answered kernel_info (median, range of %d interleaved rounds, s)", concurrentKernels, concurrentRounds), target: "median ≤ 1.1× direct",
			cell: func(r, d *kernelResults) string {
				rounds := ""
				if n := len(r.concurrent); n < concurrentRounds {
					rounds = fmt.Sprintf(", %d of %d rounds worked", n, concurrentRounds)
				}
				return fmt.Sprintf("%.1f, range %.1f–%.1f%s%s", p50(r.concurrent).Seconds(), r.concurrent[0].Seconds(),
					r.concurrent[len(r.concurrent)-1].Seconds(), rounds, ratio(d, scConcurrent, concurrent, r))
			},
			meets: within(scConcurrent, concurrent, 1.1),
		},
		{
			sc: scMany, title: fmt.Sprintf("%d kernels started at once, until all answered kernel_info (s, one round; none may fail)", manyKernels), target: "none fails, ≤ 1.1× direct",
			cell: func(r, d *kernelResults) string {
				return fmt.Sprintf("%.1f%s", r.many.Seconds(), ratio(d, scMany, func(r *kernelResults) time.Duration { return r.many }, r))
			},
			meets: within(scMany, func(r *kernelResults) time.Duration { return r.many }, 1.1),
		},
		{
			sc: scDelete, title: fmt.Sprintf("`DELETE /api/kernels/<id>` → 204 (p50 / max ms, %d kernels)", kernelStarts), target: "p50 < 180 ms",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.0f / %.0f", ms(p50(r.del)), ms(r.del[len(r.del)-1]))
			},
			meets: func(nb, _ *kernelResults) bool { return p50(nb.del) < 180*time.Millisecond },
		},
		{
			sc: scRSS, title: fmt.Sprintf("server-side RSS per kernel, kernel processes excluded (MiB, %d kernels)", concurrentKernels), target: "< 20 MiB",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.1f (%s)", r.rss.perKernel/(1<<20), r.rss.how)
			},
			meets: func(nb, _ *kernelResults) bool { return nb.rss.perKernel < 20<<20 },
		},
		{
			sc: scBurstCPU, title: fmt.Sprintf("CPU of %d kernels started at once, by process, below the server (s; the round of the median time)", concurrentKernels), target: "–",
			cell: func(r, _ *kernelResults) string {
				server := "Jupyter Server"
				if r.column == "nbkube" {
					server = "nbkube"
				}
				return formatBurst(medianBurst(r.burst), server)
			},
		},
		{
			sc: scCPU, title: "proxy CPU per relayed message during the stream (ms)", target: "< 0.1 ms",
			cell: func(r, _ *kernelResults) string {
				return fmt.Sprintf("%.3f (%s)", ms(r.cpu.perMessage), r.cpu.how)
			},
			meets: func(nb, _ *kernelResults) bool { return nb.cpu.perMessage < 100*time.Microsecond },
		},
	}
}

// writeKernels appends the kernel section to the report.
func writeKernels(b *strings.Builder, rep *kernelReport) {
	b.WriteString("\n## Kernels\n\n" +
		"The standard Jupyter API on both servers (POST and DELETE /api/kernels, Jupyter's JSON protocol on the " +
		"channels WebSocket), from a Go client in this process. \"direct\" is the floor, no server at all: " +
		"test/bench/floor.py drives ipykernel over ZMQ with jupyter_client. The same ipykernel (Debian's " +
		"/usr/bin/python3) runs under all three; under nbkube local it is forked from a warm interpreter " +
		"(docs/local.md), where the others start a new one per kernel.\n\n")
	b.WriteString("| scenario | nbkube | Jupyter Server | direct | target (nbkube) | nbkube meets it |\n|---|---|---|---|---|---|\n")
	for _, row := range kernelRows() {
		cell := func(r *kernelResults) string {
			switch {
			case r == nil:
				return "not measured"
			case row.sc == scRSS || row.sc == scCPU || row.sc == scBurstCPU:
				if r == rep.direct {
					return "– (no server)"
				}
			}
			if err := r.errs[row.sc]; err != nil {
				return "n/a (error: " + markdownCell(err.Error(), 120) + ")"
			}
			return row.cell(r, rep.direct)
		}
		meets := "–"
		if rep.nbkube != nil && rep.nbkube.errs[row.sc] == nil && row.meets != nil {
			meets = "no"
			if row.meets(rep.nbkube, rep.direct) {
				meets = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", markdownCell(row.title, 200),
			cell(rep.nbkube), cell(rep.jupyter), cell(rep.direct), row.target, meets)
		if row.sc == scStart {
			writeSandboxStart(b, rep)
		}
	}
	b.WriteString(kernelNotes)
}

// writeSandboxStart is the row of kernel starts under nbkube local --sandbox, right after the
// row of nbkube's own starts, with which it took turns.
func writeSandboxStart(b *strings.Builder, rep *kernelReport) {
	sb, nb := rep.sandboxed, rep.nbkube
	cell, meets := "not measured", "–"
	switch {
	case sb == nil:
	case sb.errs[scStart] != nil:
		cell = "n/a (error: " + markdownCell(sb.errs[scStart].Error(), 120) + ")"
	default:
		cell = fmt.Sprintf("%.0f / %.0f", ms(p50(sb.start)), ms(sb.start[len(sb.start)-1]))
		if nb != nil && nb.errs[scStart] == nil {
			ratio := float64(p50(sb.start)) / float64(p50(nb.start))
			cell += fmt.Sprintf(" (%.2f× unsandboxed)", ratio)
			meets = map[bool]string{true: "yes", false: "no"}[ratio <= 1.1]
		}
	}
	fmt.Fprintf(b, "| %s | %s | – | – | p50 ≤ 1.1× nbkube's start above | %s |\n",
		markdownCell(fmt.Sprintf("kernel start as above, every pod in a sandbox (`nbkube local --sandbox`, docs/local.md; p50 / max ms, %d starts)", kernelStarts), 200), cell, meets)
}

// markdownCell makes s fit in one table cell of at most n characters.
func markdownCell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// kernelNotes explain the kernel section; they describe the method, not a particular run.
const kernelNotes = `
### Reading the kernel numbers

* Times run from the first byte the client sends to the last message it waits for. A start is
  POST /api/kernels, the channels WebSocket opened, a kernel_info_request on shell and its reply; the
  direct start is ` + "`KernelManager.start_kernel()`" + ` and ` + "`BlockingKernelClient.kernel_info(reply=True)`" + `.
  Each start is followed by the timed DELETE (direct: ` + "`shutdown_kernel(now=False)`" + `, which Jupyter
  Server's DELETE calls: a shutdown_request, then polling every 100 ms until the process exited).
  The columns take turns, start by start, each turn led by the next column, with the servers
  idle before each start: one column's starts in a row, minutes before another's, compared
  the machine's drift (the floor's p50 moved between 740 and 1254 ms from run to run).
* A round trip ends when both the execute_reply (shell) and the idle status of the request
  (iopub) arrived. For reference, the issue measured Jupyter Server's ` + "`1+1`" + ` at p50 48 ms (no
  TCP_NODELAY on its WebSocket) against 4.1–4.3 ms direct, and a start at 576 ms against
  456–470 ms direct, on a faster machine than this one.
* The stream counts the iopub stream messages of the request until its idle status, and the
  lines they carry (20000 when nothing was dropped): ipykernel sends a flushed print as its own
  message unless prints pile up faster than its IO thread sends them. Jupyter Server limits iopub
  to 1000 messages/s over 3 s by default and drops stream output above that, with a notice; nbkube's
  agent applies the same limits, so fewer than 20000 lines through a server is the limit at work.
* Twenty kernels at once runs in rounds after the other scenarios (the row's title says how
  many): each round starts twenty on every column in turn, each round led by the next column,
  and the cell gives the median and the range. Twenty starts keep both cores busy for 12–18 s,
  and this machine's speed drifts by as much between minutes, so a single start per column,
  minutes apart, compared the drift as much as the servers. The RSS per kernel is taken with the
  twenty kernels of a server's first round that started any. Jupyter Server's single asyncio
  process costs less than the floor's client (below), so it can come in under the floor here.
* A hundred kernels at once runs once per column, last: every start must succeed (a failed one
  is the cell's error). Each of nbkube's starts also runs the local control plane's share (a
  Kernel, a Secret and a pod written and watched) and an agent, on the same two cores.
* RSS per kernel is the server side only, kernel processes excluded: for nbkube the mean RSS of
  the ` + "`nbkube-agent`" + ` processes (found below ` + "`nbkube local`" + ` by their command line) with the 20 kernels
  running; for Jupyter Server the growth of its process from no kernel to 20, divided by 20.
* Proxy CPU is utime+stime (/proc/<pid>/stat, 10 ms ticks) over the stream, divided by the
  messages the client received plus the one it sent: for nbkube the ` + "`nbkube local`" + ` process (its API
  server; the controllers and local node idle beside it) plus the agents, for Jupyter Server its
  process. Output dropped by the rate limit was read from the kernel too but is not in the count,
  so when lines were dropped the figure overstates the cost per message.
* nbkube local forks its Python kernels from a warm interpreter, the node's kernel fork server
  (docs/local.md), where Jupyter Server and the floor start a new interpreter for each: about
  0.6–0.8 s of CPU importing ipykernel, IPython, jupyter_client, zmq and debugpy, which on two
  cores is most of what twenty starts at once cost. A forked kernel is the process a new
  interpreter would be (an agent test compares them); the server starts with the first kernel, so
  the rounds here find it running. On a real cluster each kernel pod starts its own interpreter
  (see "Kernels on a real cluster").
* The CPU row is utime+stime of the server's process and every process below it
  (/proc/<pid>/stat), read before the first POST and after the last kernel answered, summed by
  program ("Python" is the kernels, and nbkube's fork server), for the round whose time was the
  median. For nbkube that is its own process (API server, controllers, local node), the control
  plane it runs (kube-apiserver, etcd, kube-controller-manager), the agents and the kernels; a
  start is 11 API writes (the Kernel, its Secret, Pod and binding, three Kernel and two pod
  status updates, and the Scheduled and Started events a kubelet writes too). The floor's
  client, 20 Python threads with blocking clients, costs it 2–3 s of CPU per twenty that no
  column counts.
* A single start pays 50–130 ms from the POST to the kernel's process (median about 80),
  measured on this machine from the logs: 20–25 ms until the pod exists (the Kernel, its
  Secret and its Pod are written one after the other, 4–6 ms each), 5–10 ms to bind it, 5–7 ms
  for the local node to start it, then 20–55 ms for the agent, most of it the start of a Go
  process while the control plane handles the new pod beside it on two cores, and 3–5 ms to
  write the connection file and start the kernel's process. After the kernel answers, the
  POST's 201 follows within 2 ms. Beside a new interpreter's start that was about a tenth; beside
  a kernel forked from the warm interpreter it is about half of the start.
* The proxy's CPU per message is mostly system calls and Go runtime wake-ups: the agent reads
  a printing kernel in moderated batches (at most 8 ms late, with the socket's low-water mark
  raised meanwhile so that arriving lines do not wake it) and both the agent and the API
  server write what they have at hand in one write; see docs/agent.md.
* "n/a (error …)" marks a scenario a server could not run; the rest of the bench goes on.
`
