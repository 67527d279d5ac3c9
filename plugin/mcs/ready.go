package mcs

// Ready implements the ready plugin's Readiness: true once the cluster name
// is known and every informer has delivered its initial list to the index.
func (m *MCS) Ready() bool { return m.watcher.ready.Load() }
