package mappingstest

// SetState makes List report the mapping with this state and last processing result (a
// mapping that Lambda disabled, or whose poller reports a PROBLEM); false if there is none.
func (f *Fake) SetState(uuid, state, lastProcessingResult string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mappings[uuid]
	if ok {
		m.State, m.LastProcessingResult = state, lastProcessingResult
	}
	return ok
}
