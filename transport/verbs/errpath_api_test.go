package verbs

// failureOf and lateUDOf read the fail-stop state and the late-link
// counter (kept apart so that the error-path tests could first be run
// against the code before them, with stubs returning nil and 0).
func failureOf(tr *Transport) error { return tr.Failure() }

func lateUDOf(tr *Transport) uint64 { return tr.VerbsStats().LateUD }
