//go:build !race

package revisions

// raceEnabled: the race detector allocates on its own, and an allocation guard allows for it.
const raceEnabled = false
