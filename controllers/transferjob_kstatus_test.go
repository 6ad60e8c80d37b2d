package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// argoHealthScript is the Argo CD health check shipped in docs/gitops.md.
const argoHealthScript = "../docs/gitops/argocd-health-transferjob.lua"

// TestGitOpsReadings runs one table of job conditions, as the controller writes them,
// through the three readers GitOps users meet: the kstatus conditions themselves,
// kstatus's own Compute (what Flux's health checks call), and the Argo CD health check
// in Lua, run by a Lua interpreter.
func TestGitOpsReadings(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason + " message"}
	}
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	type want struct {
		ready, reconciling, stalled metav1.ConditionStatus
		reason                      string
		kstatus                     status.Status
		argo                        string
	}
	progressing := func(reason string) want {
		return want{F, T, F, reason, status.InProgressStatus, "Progressing"}
	}
	tests := map[string]struct {
		conds []metav1.Condition
		// generation of the spec; the status was written for generation 1
		generation int64
		want       want
	}{
		"first pass, nothing yet": {nil, 1, progressing(ReasonPending)},
		"waiting for the listing": {[]metav1.Condition{c("Planned", F, ReasonListingDataset)}, 1, progressing(ReasonListingDataset)},
		"probing": {[]metav1.Condition{c("Probing", T, ReasonProbing), c("Planned", F, ReasonProbing)}, 1,
			progressing(ReasonProbing)},
		"transferring": {[]metav1.Condition{c("Probing", F, ReasonProbeComplete), c("Planned", T, ReasonPlanned), c("Transferring", T, ReasonTransferring)}, 1,
			progressing(ReasonTransferring)},
		"no Ready node, waiting for one": {[]metav1.Condition{c("Planned", F, ReasonNoReadyNodes)}, 1, progressing(ReasonNoReadyNodes)},
		"no plan fits yet":               {[]metav1.Condition{c("Planned", F, ReasonPlanFailed)}, 1, progressing(ReasonPlanFailed)},
		"queued behind a path's limit":   {[]metav1.Condition{c("Queued", T, ReasonPathLimit)}, 1, progressing(ReasonPathLimit)},
		"preempted, agents stopped": {[]metav1.Condition{c("Queued", T, ReasonPreempted), c("Transferring", F, ReasonPreempted), c("Planned", T, ReasonPlanned)}, 1,
			progressing(ReasonPreempted)},
		"admitted and transferring": {[]metav1.Condition{c("Queued", F, ReasonAdmitted), c("Planned", T, ReasonPlanned), c("Transferring", T, ReasonTransferring)}, 1,
			progressing(ReasonTransferring)},
		"an agent pod refused (admission, quota)": {[]metav1.Condition{c("Probing", T, ReasonProbing), c("AgentsScheduled", F, ReasonPodRefused)}, 1,
			want{F, F, T, ReasonPodRefused, status.FailedStatus, "Degraded"}},
		"an agent pod with no node": {[]metav1.Condition{c("Probing", T, ReasonProbing), c("AgentsScheduled", F, ReasonUnschedulable)}, 1,
			progressing(ReasonUnschedulable)},
		"agents on their nodes, transferring": {[]metav1.Condition{c("Transferring", T, ReasonTransferring), c("AgentsScheduled", T, ReasonAgentsScheduled)}, 1,
			progressing(ReasonTransferring)},
		"priority class missing": {[]metav1.Condition{c("Planned", F, ReasonPriorityClassNotFound)}, 1,
			want{F, F, T, ReasonPriorityClassNotFound, status.FailedStatus, "Degraded"}},
		"endpoint missing": {[]metav1.Condition{c("Planned", F, ReasonEndpointNotFound)}, 1,
			want{F, F, T, ReasonEndpointNotFound, status.FailedStatus, "Degraded"}},
		"namespace not allowed, agents stopped": {[]metav1.Condition{c("Planned", F, ReasonNamespaceNotAllowed), c("Transferring", F, ReasonNamespaceNotAllowed)}, 1,
			want{F, F, T, ReasonNamespaceNotAllowed, status.FailedStatus, "Degraded"}},
		"read-only destination": {[]metav1.Condition{c("Planned", F, ReasonDestinationReadOnly)}, 1,
			want{F, F, T, ReasonDestinationReadOnly, status.FailedStatus, "Degraded"}},
		"pausing": {[]metav1.Condition{c("Transferring", T, ReasonTransferring), c("Suspended", T, ReasonPausing)}, 1,
			progressing(ReasonPausing)},
		"suspended": {[]metav1.Condition{c("Transferring", F, ReasonSuspended), c("Suspended", T, ReasonSuspended)}, 1,
			want{"", F, F, ReasonSuspended, status.CurrentStatus, "Suspended"}},
		"resumed": {[]metav1.Condition{c("Transferring", T, ReasonTransferring), c("Suspended", F, ReasonResumed)}, 1,
			progressing(ReasonTransferring)},
		"complete": {[]metav1.Condition{c("Transferring", F, ReasonComplete), c("Complete", T, ReasonVerified)}, 1,
			want{T, F, F, ReasonVerified, status.CurrentStatus, "Healthy"}},
		"restored from its expired record": {[]metav1.Condition{c("Complete", T, ReasonCompletedBefore)}, 1,
			want{T, F, F, ReasonCompletedBefore, status.CurrentStatus, "Healthy"}},
		"failed": {[]metav1.Condition{c("Transferring", F, ReasonFailed), c("Failed", T, ReasonBackoffLimitExceeded)}, 1,
			want{F, F, T, ReasonBackoffLimitExceeded, status.FailedStatus, "Degraded"}},
		"partially complete: files skipped at the source": {[]metav1.Condition{c("Transferring", F, ReasonComplete), c("PartiallyComplete", T, ReasonSourceFilesSkipped)}, 1,
			want{F, F, T, ReasonSourceFilesSkipped, status.FailedStatus, "Degraded"}},
		"failed though also complete": {[]metav1.Condition{c("Complete", T, ReasonVerified), c("Failed", T, ReasonTransferFailed)}, 1,
			want{F, F, T, ReasonTransferFailed, status.FailedStatus, "Degraded"}},
		"complete, but the spec changed since": {[]metav1.Condition{c("Complete", T, ReasonVerified)}, 2,
			want{T, F, F, ReasonVerified, status.InProgressStatus, "Progressing"}},
	}
	script, err := os.ReadFile(argoHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := dtnflowv1alpha1.TransferJobStatus{Conditions: tc.conds, ObservedGeneration: 1}
			setSummaryConditions(&st, 1, now)
			st.State = stateOf(st.Conditions)
			for typ, want := range map[string]metav1.ConditionStatus{
				dtnflowv1alpha1.ConditionReady: tc.want.ready, dtnflowv1alpha1.ConditionReconciling: tc.want.reconciling, dtnflowv1alpha1.ConditionStalled: tc.want.stalled,
			} {
				got := findCondition(st.Conditions, typ)
				if want == "" {
					if got != nil {
						t.Errorf("%s = %+v, want it left out", typ, got)
					}
					continue
				}
				if got == nil || got.Status != want || got.Reason != tc.want.reason || got.Message == "" {
					t.Errorf("%s = %+v, want status %s, reason %s and a message", typ, got, want, tc.want.reason)
				}
			}
			job := &dtnflowv1alpha1.TransferJob{
				TypeMeta:   metav1.TypeMeta{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferJob"},
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "physics", Generation: tc.generation},
				Status:     st,
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if res.Status != tc.want.kstatus {
				t.Errorf("kstatus says %s (%s), want %s", res.Status, res.Message, tc.want.kstatus)
			}
			health, message := argoHealth(t, string(script), raw)
			if health != tc.want.argo || message == "" {
				t.Errorf("Argo CD health = %s (%q), want %s with a message", health, message, tc.want.argo)
			}
		})
	}
}

// TestArgoHealthOfOlderStatus covers what the Lua check reads when the kstatus
// conditions are absent (a status written by a manager that predates them) or the
// status itself is.
func TestArgoHealthOfOlderStatus(t *testing.T) {
	script, err := os.ReadFile(argoHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ, s string) any {
		return map[string]any{"type": typ, "status": s, "reason": "R", "message": typ + " says so"}
	}
	tests := map[string]struct {
		obj  map[string]any
		want string
	}{
		"no status":          {map[string]any{"metadata": map[string]any{"generation": int64(1)}}, "Progressing"},
		"not observed":       {map[string]any{"metadata": map[string]any{"generation": int64(2)}, "status": map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Complete", "True")}}}, "Progressing"},
		"complete":           {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Complete", "True")}}}, "Healthy"},
		"failed":             {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Failed", "True")}}}, "Degraded"},
		"partially complete": {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("PartiallyComplete", "True")}}}, "Degraded"},
		"suspended":          {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Suspended", "True")}}}, "Suspended"},
		"transferring":       {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1), "state": "Transferring", "conditions": []any{cond("Transferring", "True")}}}, "Progressing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got, msg := argoHealth(t, string(script), tc.obj); got != tc.want || msg == "" {
				t.Errorf("Argo CD health = %s (%q), want %s with a message", got, msg, tc.want)
			}
		})
	}
}

// TestGitOpsDocShowsTheScript keeps the copy in docs/gitops.md, which users paste into
// argocd-cm, the same as the script the tests run.
func TestGitOpsDocShowsTheScript(t *testing.T) {
	script, err := os.ReadFile(argoHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	var indented strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(script), "\n"), "\n") {
		if line == "" {
			indented.WriteString("\n")
			continue
		}
		indented.WriteString("    " + line + "\n")
	}
	if !strings.Contains(string(doc), indented.String()) {
		t.Errorf("docs/gitops.md does not hold %s verbatim (indented by four spaces under the argocd-cm key)", argoHealthScript)
	}
}

// argoHealth runs an Argo CD health script on obj as Argo CD does: obj is a global
// table, the script's result a table with status and message.
func argoHealth(t *testing.T, script string, obj map[string]any) (string, string) {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("running the health script: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health script returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(hs.RawGetString("status")), lua.LVAsString(hs.RawGetString("message"))
}

// toLua converts decoded JSON into Lua values the way Argo CD's Lua VM sees objects.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case map[string]any:
		tbl := L.NewTable()
		for k, e := range x {
			tbl.RawSetString(k, toLua(L, e))
		}
		return tbl
	case []any:
		tbl := L.NewTable()
		for _, e := range x {
			tbl.Append(toLua(L, e))
		}
		return tbl
	}
	panic(fmt.Sprintf("toLua: %T", v))
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
