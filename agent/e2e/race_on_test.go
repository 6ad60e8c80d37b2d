//go:build race

package e2e

// raceBuild: the tests run under the race detector, and so do the agents they start
// (TestMain).
const raceBuild = true
