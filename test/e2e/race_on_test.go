//go:build race

package e2e

// raceBuild makes the binary under test race-instrumented when the tests are.
const raceBuild = true
