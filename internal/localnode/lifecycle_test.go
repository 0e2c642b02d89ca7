package localnode

import "testing"

func TestStage_MovesOnlyForwardAlongItsTransitions(t *testing.T) {
	tests := []struct {
		from stage
		ev   stageEvent
		want stage
	}{
		{stageActive, phaseFinal, stageFinished},
		{stageActive, stoppedForDeletion, stageTerminated},
		{stageActive, objectDeleted, stageActive},

		{stageFinished, phaseFinal, stageFinished},
		{stageFinished, stoppedForDeletion, stageTerminated},
		{stageFinished, objectDeleted, stageFinished},

		// Stopping for deletion makes the phase final: a later phase change is no transition.
		{stageTerminated, phaseFinal, stageTerminated},
		{stageTerminated, stoppedForDeletion, stageTerminated},
		{stageTerminated, objectDeleted, stageDeleted},

		{stageDeleted, phaseFinal, stageDeleted},
		{stageDeleted, stoppedForDeletion, stageDeleted},
		{stageDeleted, objectDeleted, stageDeleted},
	}
	stages := map[stage]string{stageActive: "active", stageFinished: "finished", stageTerminated: "terminated", stageDeleted: "deleted"}
	events := map[stageEvent]string{phaseFinal: "phaseFinal", stoppedForDeletion: "stoppedForDeletion", objectDeleted: "objectDeleted"}
	for _, tt := range tests {
		if got := tt.from.next(tt.ev); got != tt.want {
			t.Errorf("%s after %s = %s, want %s", stages[tt.from], events[tt.ev], stages[got], stages[tt.want])
		}
	}
}
