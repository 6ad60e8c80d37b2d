package cluster

import "testing"

// TestLocalCluster is the user's path through dtnflow on a real cluster, in order, each
// step starting from what the previous ones left (TestMain has already run `helm
// install` and created the two TransferEndpoints):
//
//  1. the install: the manager on site A holding its Lease, both endpoints Ready, and a
//     helm upgrade to a chart with a changed CRD and back, the CRD following;
//  2. invalid TransferJobs refused by the API server, naming the field;
//  3. a cold job: probe, fit, plan, move a mixed dataset, every SHA-256 equal;
//  4. a second job on the path starting warm from the PathProfile, a job whose agents
//     are the endpoints' warm pool's, and two jobs writing the same files, the second
//     waiting (FilesInUse) until the first is done;
//  5. agent pods killed mid-transfer, the job still completing with identical files;
//  6. the path's rate halved mid-transfer, and the re-plan that follows;
//  7. kubectl dtnflow on a recurring job: logs through the kubelets, get, describe,
//     plot, and a second run started by rerun that moves next to nothing again;
//  8. the chaos suite's short profile: faults at random moments, every copy checked.
//
// Run one step with -run 'TestLocalCluster/<name>'; steps 4 needs step 3's profile.
func TestLocalCluster(t *testing.T) {
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"install", testInstall},
		{"chart-upgrade", testChartUpgrade},
		{"invalid-jobs-rejected", testInvalidJobRejected},
		{"cold-transfer", testColdTransfer},
		{"warm-start", testWarmStart},
		{"warm-pool", testWarmPool},
		{"files-in-use", testFilesInUse},
		{"agent-killed", testAgentKilledMidTransfer},
		{"path-rate-halved", testPathRateHalvedReplans},
		{"plugin-recurring", testPluginAndRecurringRuns},
		{"chaos-short", testChaosShort},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			onFailure(t)
			step.run(t)
		})
	}
}
