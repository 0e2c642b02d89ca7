package localnode

// stage is where a pod is in its life on this node, as its worker sees it. Stages only move
// forward, so they compare in order:
//
//	active ──phase final──▶ finished
//	  │                        │
//	  └── stopped for deletion ┴──▶ terminated ──object deleted──▶ deleted
//
// A worker starts active, or finished when the pod's phase is final from the outset: it had
// ended before the worker saw it, the node cannot run it, or a node restart ended its containers
// under restartPolicy Never. The pod leaving the API and the node shutting down end the worker
// in any stage; neither is a stage of the pod, as the worker does nothing after them.
//
// Facts that hold across stages stay fields of their own: the sandbox was set up (the status
// still reports it for a pod deleted before its containers ran), the address was released (at
// most once, whichever way the worker ends), the status is inherited (not the worker's to
// write, in every stage).
type stage int

const (
	// stageActive: the worker sets up the sandbox and starts, probes and restarts containers.
	stageActive stage = iota
	// stageFinished: the pod's phase is Succeeded or Failed; nothing starts or restarts any more.
	stageFinished
	// stageTerminated: the pod was deleted and its containers stopped, which makes its phase
	// final whatever the restart policy; the worker deletes the API object for good.
	stageTerminated
	// stageDeleted: the API object is gone; the worker waits for the informer to drop the pod.
	stageDeleted
)

// stageEvent is what moves a pod to a later stage.
type stageEvent int

const (
	// phaseFinal: the pod's phase became Succeeded or Failed.
	phaseFinal stageEvent = iota
	// stoppedForDeletion: the containers of a pod being deleted were stopped.
	stoppedForDeletion
	// objectDeleted: the API object was deleted for good.
	objectDeleted
)

// next is the stage that ev leads to from s; an event that does not apply to s leaves it, so a
// pod never moves back.
func (s stage) next(ev stageEvent) stage {
	switch {
	case ev == phaseFinal && s == stageActive:
		return stageFinished
	case ev == stoppedForDeletion && s < stageTerminated:
		return stageTerminated
	case ev == objectDeleted && s == stageTerminated:
		return stageDeleted
	}
	return s
}
