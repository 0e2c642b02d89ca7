package localnode

import "testing"

func TestStage_MovesOnlyForwardAlongItsTransitions(t *testing.T) {
	stages := map[stage]string{stageActive: "active", stageFinished: "finished", stageTerminated: "terminated", stageDeleted: "deleted"}
	events := []stageEvent{phaseFinal, stoppedForDeletion, objectDeleted}
	eventNames := map[stageEvent]string{phaseFinal: "phaseFinal", stoppedForDeletion: "stoppedForDeletion", objectDeleted: "objectDeleted"}
	// A row is a stage and where each event, in the order of events, takes it.
	tests := []struct {
		from  stage
		after [3]stage
	}{
		{from: stageActive, after: [3]stage{stageFinished, stageTerminated, stageActive}},
		{from: stageFinished, after: [3]stage{stageFinished, stageTerminated, stageFinished}},
		// Stopping for deletion makes the phase final: a later phase change is no transition.
		{from: stageTerminated, after: [3]stage{stageTerminated, stageTerminated, stageDeleted}},
		{from: stageDeleted, after: [3]stage{stageDeleted, stageDeleted, stageDeleted}},
	}
	for _, tt := range tests {
		for i, ev := range events {
			if got, want := tt.from.next(ev), tt.after[i]; got != want {
				t.Errorf("%s after %s = %s, want %s", stages[tt.from], eventNames[ev], stages[got], stages[want])
			}
		}
	}
}
