package runtime

// SaveAtEnd has a session run save its steps only when it ends, answering
// or suspending, in one write, instead of step by step: a run that an
// interceptor may still halt at a later step (a guardrail that trips) then
// leaves the session exactly as it was. Call it from InterceptRun, before
// the run's first step; it does nothing for a run outside any session.
func (ri *RunInfo) SaveAtEnd() {
	if ri.rn != nil && ri.rn.saver != nil {
		ri.rn.saver.atEnd = true
	}
}
