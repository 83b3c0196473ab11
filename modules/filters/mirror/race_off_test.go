//go:build !race

package mirror_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
