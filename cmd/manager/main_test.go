package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || !o.metricsSecure || o.metricsAddr != ":8443" || o.reportInterval != 10*time.Second || o.jobWorkers != 4 {
		t.Errorf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"--leader-elect=false", "--report-interval=3s", "--agent-image-pull-policy=Never", "--agent-image-pull-secrets=regcred,other"})
	if err != nil || o.leaderElect || o.reportInterval != 3*time.Second || o.agentPullPolicy != "Never" || len(o.agentPullSecrets) != 2 || o.agentPullSecrets[1] != "other" {
		t.Errorf("parsed %+v, %v", o, err)
	}
	for _, bad := range []struct{ args, want string }{
		{"--agent-image-pull-policy=Sometimes", "--agent-image-pull-policy"},
		{"--report-interval=0s", "--report-interval"},
		{"--job-workers=many", "job-workers"},
		{"--no-such-flag", "unknown flag"},
	} {
		if _, err := parseFlags([]string{bad.args}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one naming %s", bad.args, err, bad.want)
		}
	}
	if _, err := parseFlags([]string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}
