// Package chart tests charts/dtnflow without a cluster: helm lint and template, that
// every value is documented, that the CRDs and RBAC rules are the generated ones, that
// the rules stay least-privilege, and that every rendered object is accepted by a real
// kube-apiserver (server-side dry-run on the API server envtest starts from
// KUBEBUILDER_ASSETS, which `make test-e2e` sets).
package chart

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/metrics"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

const namespace = "dtnflow-system"

// valueSets are the configurations every test renders: the defaults, the local
// cluster's, and the switches that change which objects exist.
var valueSets = map[string][]string{
	"defaults":              nil,
	"local cluster":         {"--values", filepath.Join(framework.RepoRoot(), "hack", "cluster", "values-local.yaml"), "--set", "apiServer.host=10.77.0.2"},
	"metrics off":           {"--set", "metrics.enabled=false"},
	"insecure metrics":      {"--set", "metrics.secure=false"},
	"existing account":      {"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=dtnflow-sa"},
	"two replicas":          {"--set", "manager.replicas=2"},
	"network policies":      {"--set", "networkPolicy.agents.namespaces[0]=e2e", "--set", "networkPolicy.agents.peerCIDRs[0]=10.78.1.0/24", "--set", "networkPolicy.manager.metricsFrom[0].namespaceSelector.matchLabels.monitoring=yes"},
	"scheduling and extras": {"--set", "manager.nodeSelector.dtn=yes", "--set", "manager.tolerations[0].operator=Exists", "--set", "manager.extraArgs[0]=--foo", "--set", "manager.extraEnv[0].name=A", "--set", "manager.extraEnv[0].value=b", "--set", "imagePullSecrets[0].name=reg"},
	"dashboard":             {"--set", "metrics.grafanaDashboard.enabled=true"},
	"CRDs kept apart":       {"--set", "crds.install=false", "--set", "rbac.aggregateToDefaultRoles=false"},
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := framework.HelmBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if s := stderr.String(); strings.Contains(strings.ToLower(s), "warn") {
		t.Errorf("helm %s warned:\n%s", strings.Join(args, " "), s)
	}
	return stdout.String()
}

// render runs helm template with the given values and decodes every object.
func render(t *testing.T, includeCRDs bool, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", framework.ReleaseName, framework.ChartDir(), "--namespace", namespace}
	if includeCRDs {
		args = append(args, "--include-crds")
	}
	out := helm(t, append(args, values...)...)
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding helm template output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return objs
}

func TestLint(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			out := helm(t, append([]string{"lint", "--strict", framework.ChartDir()}, values...)...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
}

// TestRenderedObjects checks what each configuration renders: the objects that must be
// there, in the release namespace, and the manager's flags, probes and images.
func TestRenderedObjects(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := render(t, false, values...)
			kinds := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				kinds[o.GetKind()+"/"+o.GetName()] = o
				agentPolicy := o.GetKind() == "NetworkPolicy" && o.GetName() == "dtnflow-agents" // in the jobs' namespaces
				if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "CustomResourceDefinition" && !agentPolicy && o.GetNamespace() != namespace {
					t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
				}
				if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("%s %s has no app.kubernetes.io/managed-by label", o.GetKind(), o.GetName())
				}
			}
			deploy := kinds["Deployment/dtnflow-manager"]
			if deploy == nil {
				t.Fatalf("no Deployment dtnflow-manager among %v", keys(kinds))
			}
			checkNetworkPolicies(t, name, kinds)
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			manager := containers[0].(map[string]any)
			args := fmt.Sprint(manager["args"])
			for _, want := range []string{"--leader-elect=true", "--health-probe-bind-address=:8081", "--agent-image=", "--agent-image-pull-policy="} {
				if !strings.Contains(args, want) {
					t.Errorf("manager args %s lack %s", args, want)
				}
			}
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				if manager[probe] == nil {
					t.Errorf("manager has no %s", probe)
				}
			}
			_, metricsService := kinds["Service/dtnflow-metrics"]
			wantMetrics := name != "metrics off"
			if metricsService != wantMetrics {
				t.Errorf("metrics Service rendered: %v, want %v", metricsService, wantMetrics)
			}
			if wantMetrics && !strings.Contains(args, "--metrics-bind-address=:8443") {
				t.Errorf("manager args %s do not serve metrics", args)
			}
			_, pdb := kinds["PodDisruptionBudget/dtnflow-manager"]
			if pdb != (name == "two replicas") {
				t.Errorf("PodDisruptionBudget rendered: %v in %q; want one exactly with more than one replica", pdb, name)
			}
			_, edit := kinds["ClusterRole/dtnflow-edit"]
			_, view := kinds["ClusterRole/dtnflow-view"]
			if edit != (name != "CRDs kept apart") || view != edit {
				t.Errorf("aggregated edit/view ClusterRoles rendered: %v/%v in %q", edit, view, name)
			}
			if _, dash := kinds["ConfigMap/dtnflow-grafana-dashboard"]; dash != (name == "dashboard") {
				t.Errorf("Grafana dashboard rendered: %v in %q", dash, name)
			}
			crds := 0
			for k := range kinds {
				if strings.HasPrefix(k, "CustomResourceDefinition/") {
					crds++
				}
			}
			if want := map[bool]int{true: 0, false: 7}[name == "CRDs kept apart"]; crds != want {
				t.Errorf("%d CRDs rendered in %q, want %d", crds, name, want)
			}
			_, account := kinds["ServiceAccount/dtnflow"]
			if account != (name != "existing account") {
				t.Errorf("ServiceAccount rendered: %v in %q", account, name)
			}
			env := fmt.Sprint(manager["env"])
			if name == "local cluster" {
				for _, want := range []string{"KUBERNETES_SERVICE_HOST value:10.77.0.2", "KUBERNETES_SERVICE_PORT value:6443"} {
					if !strings.Contains(env, want) {
						t.Errorf("manager env %s lacks %s", env, want)
					}
				}
				if hn, _, _ := unstructured.NestedBool(deploy.Object, "spec", "template", "spec", "hostNetwork"); !hn {
					t.Error("the local cluster's manager is not on the host network")
				}
				if st, _, _ := unstructured.NestedString(deploy.Object, "spec", "strategy", "type"); st != "Recreate" {
					t.Errorf("a host-network manager rolls with strategy %q; want Recreate (the new pod cannot bind the old one's ports)", st)
				}
				if !strings.Contains(args, "--agent-api-server-host=10.77.0.2") {
					t.Errorf("manager args %s do not hand the API server's address on to the agents", args)
				}
			} else if strings.Contains(env, "KUBERNETES_SERVICE_HOST") {
				t.Errorf("manager env %s overrides the API server on a normal cluster", env)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestValuesDocumented checks that every value in values.yaml has a `# --` comment,
// on itself or on the map it belongs to, so `helm show values` explains everything.
func TestValuesDocumented(t *testing.T) {
	f, err := os.Open(filepath.Join(framework.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	key := regexp.MustCompile(`^(\s*)([A-Za-z0-9_]+):(.*)$`)
	type level struct {
		indent     int
		documented bool
	}
	var stack []level
	documentedNext := false
	scanner := bufio.NewScanner(f)
	n, checked := 0, 0
	for scanner.Scan() {
		n++
		line := scanner.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			documentedNext = true
			continue
		case strings.HasPrefix(trimmed, "#") || trimmed == "" || strings.HasPrefix(trimmed, "-"):
			continue
		}
		m := key.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		documented := documentedNext
		for _, l := range stack {
			documented = documented || l.documented
		}
		documentedNext = false
		isMap := strings.TrimSpace(m[3]) == ""
		if !isMap {
			checked++
			if !documented {
				t.Errorf("values.yaml:%d: %s has no '# --' comment (nor has the map it is in)", n, strings.TrimSpace(m[2]))
			}
		}
		stack = append(stack, level{indent: indent, documented: documented})
	}
	if checked < 20 {
		t.Fatalf("checked only %d values: is values.yaml parsed right?", checked)
	}
}

// TestGeneratedFilesAreCopies checks that the chart's CRDs and the manager's rules are
// exactly what `make manifests` generated (make chart-sync copies them).
func TestGeneratedFilesAreCopies(t *testing.T) {
	root := framework.RepoRoot()
	bases, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	copies, _ := filepath.Glob(filepath.Join(framework.ChartDir(), "files", "crds", "*.yaml"))
	if len(bases) == 0 || len(bases) != len(copies) {
		t.Fatalf("config/crd/bases has %d CRDs, charts/dtnflow/files/crds %d: run make chart-sync", len(bases), len(copies))
	}
	for _, b := range bases {
		want, _ := os.ReadFile(b)
		got, err := os.ReadFile(filepath.Join(framework.ChartDir(), "files", "crds", filepath.Base(b)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/dtnflow/files/crds/%s differs from config/crd/bases: run make chart-sync", filepath.Base(b))
		}
	}
	if old, _ := filepath.Glob(filepath.Join(framework.ChartDir(), "crds", "*")); len(old) > 0 {
		t.Errorf("charts/dtnflow/crds holds %v: Helm would install those once and never upgrade them, and they would clash with templates/crds.yaml", old)
	}
	generated := filepath.Join(root, "config", "rbac", "role.yaml")
	want, err := os.ReadFile(generated)
	if os.IsNotExist(err) {
		t.Skip("config/rbac/role.yaml is not generated yet (make manifests)")
	}
	got, _ := os.ReadFile(filepath.Join(framework.ChartDir(), "files", "manager-role.yaml"))
	if !bytes.Equal(got, want) {
		t.Error("charts/dtnflow/files/manager-role.yaml differs from config/rbac/role.yaml: run make chart-sync")
	}
}

// TestLeastPrivilege checks the rules the chart grants: no wildcards, no way to gain
// more rights (escalate, bind, impersonate), no writes to nodes or namespaces, secrets
// only created and deleted for jobs, and nothing cluster-wide beyond the manager's
// ClusterRole and the metrics' TokenReview/SubjectAccessReview.
func TestLeastPrivilege(t *testing.T) {
	forbiddenVerbs := map[string]bool{"*": true, "escalate": true, "bind": true, "impersonate": true}
	for _, o := range render(t, false) {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		b, _ := o.MarshalJSON()
		if err := yaml.Unmarshal(b, &role); err != nil {
			t.Fatal(err)
		}
		// the aggregated roles are users' rights on dtnflow's own kinds, not the manager's
		forUsers := o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" || o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
		for _, rule := range role.Rules {
			if forUsers && (len(rule.APIGroups) != 1 || rule.APIGroups[0] != "dtnflow.io" || hasAny(rule.Resources, "transferendpoints") && hasAny(rule.Verbs, "create", "update", "patch", "delete")) {
				t.Errorf("%s %s, aggregated to users' roles, grants more than TransferJobs and reading dtnflow.io: %+v", o.GetKind(), o.GetName(), rule)
			}
			for _, v := range rule.Verbs {
				if forbiddenVerbs[v] {
					t.Errorf("%s %s grants verb %q: %+v", o.GetKind(), o.GetName(), v, rule)
				}
			}
			for _, r := range append(append([]string{}, rule.Resources...), rule.APIGroups...) {
				if r == "*" {
					t.Errorf("%s %s has a wildcard: %+v", o.GetKind(), o.GetName(), rule)
				}
			}
			for _, r := range rule.Resources {
				writes := hasAny(rule.Verbs, "create", "update", "patch", "delete", "deletecollection")
				switch {
				case (r == "nodes" || r == "namespaces") && writes:
					t.Errorf("%s %s may change %s: %+v", o.GetKind(), o.GetName(), r, rule)
				case r == "secrets" && hasAny(rule.Verbs, "update", "patch", "deletecollection"):
					t.Errorf("%s %s may rewrite secrets: %+v", o.GetKind(), o.GetName(), rule)
				case r == "transferjobs" && hasAny(rule.Verbs, "create", "update", "patch") && !forUsers:
					t.Errorf("%s %s may change users' TransferJob specs: %+v", o.GetKind(), o.GetName(), rule)
				}
			}
		}
	}
}

func hasAny(list []string, want ...string) bool {
	for _, l := range list {
		for _, w := range want {
			if l == w {
				return true
			}
		}
	}
	return false
}

// TestServerSideDryRun sends every object each configuration renders, CRDs included,
// to a real kube-apiserver as a server-side apply with dryRun=All: the API server
// validates them against its schemas (and the RBAC rules against escalation) without
// keeping anything.
func TestServerSideDryRun(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run 'make test-e2e', which builds kube-apiserver and etcd into .cache and sets it")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dyn := dynamic.NewForConfigOrDie(cfg)
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, name := range []string{namespace, "e2e"} { // e2e: where "network policies" puts the agents' policy
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := render(t, true, values...)
			crds := 0
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s %s: the API server does not serve %s: %v", gvk.Kind, o.GetName(), gvk, err)
					continue
				}
				var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
				if mapping.Scope.Name() == "namespace" {
					ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
				}
				b, _ := o.MarshalJSON()
				if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{
					FieldManager: "dtnflow-chart-test", DryRun: []string{metav1.DryRunAll}, Force: ptrTo(true),
				}); err != nil {
					t.Errorf("server-side dry-run of %s %s/%s refused: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
				}
				if gvk.Kind == "CustomResourceDefinition" {
					crds++
				}
			}
			if want := map[bool]int{true: 0, false: 7}[name == "CRDs kept apart"]; crds != want {
				t.Errorf("the chart installs %d CRDs, want %d (TransferJob, TransferEndpoint, PathProfile, TransferPriorityClass, TransferPeer, RemoteSite, RemoteTransfer unless crds.install is false)", crds, want)
			}
		})
	}
	// dry-run kept nothing
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=dtnflow"})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after dry-runs the API server holds %d dtnflow ClusterRoles (err %v), want none", len(list.Items), err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// checkNetworkPolicies checks the manager's NetworkPolicy (always on here) and, in the
// value set that lists a namespace, the agents' policy there: their port range, from
// the peer CIDRs only.
func checkNetworkPolicies(t *testing.T, valueSet string, kinds map[string]*unstructured.Unstructured) {
	t.Helper()
	np := kinds["NetworkPolicy/dtnflow-manager"]
	if np == nil {
		t.Fatalf("no NetworkPolicy dtnflow-manager")
	}
	ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	if len(ingress) == 0 {
		t.Errorf("the manager's NetworkPolicy opens nothing: %v", np.Object["spec"])
	}
	agents := kinds["NetworkPolicy/dtnflow-agents"]
	if valueSet != "network policies" {
		if agents != nil {
			t.Errorf("an agents' NetworkPolicy without networkPolicy.agents.namespaces")
		}
		return
	}
	if agents == nil || agents.GetNamespace() != "e2e" {
		t.Fatalf("no agents' NetworkPolicy in namespace e2e")
	}
	rules, _, _ := unstructured.NestedSlice(agents.Object, "spec", "ingress")
	if len(rules) != 1 {
		t.Fatalf("agents' policy ingress %v, want one rule", rules)
	}
	rule := rules[0].(map[string]any)
	port := rule["ports"].([]any)[0].(map[string]any)
	from := rule["from"].([]any)[0].(map[string]any)["ipBlock"].(map[string]any)
	if fmt.Sprint(port["port"], "-", port["endPort"]) != "47000-47099" || from["cidr"] != "10.78.1.0/24" {
		t.Errorf("agents' policy rule %v, want ports 47000-47099 from 10.78.1.0/24", rule)
	}
}

// helmFails runs helm and returns its error output, failing the test when helm succeeds.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := framework.HelmBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("helm %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestSchemaRefusesBadValues: values.schema.json makes helm refuse a value of the wrong
// type or an unknown key, naming it, before anything reaches a cluster.
func TestSchemaRefusesBadValues(t *testing.T) {
	tests := map[string]struct{ set, want string }{
		"replicas not a number":  {"manager.replicas=abc", "/manager/replicas"},
		"negative replicas":      {"manager.replicas=-1", "/manager/replicas"},
		"a misspelt key":         {"manager.replica=2", "'replica' not allowed"},
		"an unknown pull policy": {"agent.image.pullPolicy=Sometimes", "/agent/image/pullPolicy"},
		"a port out of range":    {"metrics.port=70000", "/metrics/port"},
		"an unknown log format":  {"manager.logFormat=xml", "/manager/logFormat"},
		"an unknown log level":   {"manager.logLevel=chatty", "/manager/logLevel"},
		"a Service type typo":    {"metrics.service.type=Cluster", "/metrics/service/type"},
		"a bad scrape interval":  {"metrics.serviceMonitor.interval=often", "/metrics/serviceMonitor/interval"},
		"crds not a boolean":     {"crds.install=maybe", "/crds/install"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := helmFails(t, "template", framework.ReleaseName, framework.ChartDir(), "--namespace", namespace, "--set", tc.set)
			if !strings.Contains(out, tc.want) {
				t.Errorf("helm's refusal does not name %s:\n%s", tc.want, out)
			}
		})
	}
	for _, ok := range []string{"manager.logLevel=4", "manager.image.tag=1.2", "manager.podDisruptionBudget.maxUnavailable=50%"} {
		helm(t, "template", framework.ReleaseName, framework.ChartDir(), "--namespace", namespace, "--set", ok)
	}
}

// TestRenderedCRDsAreTheGeneratedOnes: the CRDs the chart renders (so that helm upgrade
// updates them) are the generated ones, field for field, with Helm's labels and the keep
// policy unless crds.keep is false.
func TestRenderedCRDsAreTheGeneratedOnes(t *testing.T) {
	generated := map[string]apiextensionsv1.CustomResourceDefinition{}
	bases, _ := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	for _, b := range bases {
		raw, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatal(err)
		}
		generated[crd.Name] = crd
	}
	for _, keep := range []bool{true, false} {
		rendered := 0
		for _, o := range render(t, false, "--set", fmt.Sprintf("crds.keep=%v", keep)) {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			rendered++
			b, _ := o.MarshalJSON()
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(b, &crd); err != nil {
				t.Fatal(err)
			}
			want, ok := generated[crd.Name]
			if !ok {
				t.Errorf("the chart renders CRD %s, which make manifests did not generate", crd.Name)
				continue
			}
			if !equality.Semantic.DeepEqual(crd.Spec, want.Spec) {
				t.Errorf("the chart's CRD %s differs from config/crd/bases (a template round trip changed it)", crd.Name)
			}
			if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" {
				t.Errorf("CRD %s lacks Helm's labels: %v", crd.Name, crd.Labels)
			}
			if got := crd.Annotations["helm.sh/resource-policy"] == "keep"; got != keep {
				t.Errorf("CRD %s with crds.keep=%v: keep policy %v", crd.Name, keep, got)
			}
		}
		if rendered != len(generated) {
			t.Errorf("%d CRDs rendered, %d generated", rendered, len(generated))
		}
	}
}

// TestMonitoring: the ServiceMonitor exists only where the Prometheus Operator's API
// does, scrapes the metrics Service's port, and the Grafana dashboard asks only for
// metrics the manager has.
func TestMonitoring(t *testing.T) {
	on := []string{"--set", "metrics.serviceMonitor.enabled=true"}
	for _, o := range render(t, false, on...) {
		if o.GetKind() == "ServiceMonitor" {
			t.Errorf("a ServiceMonitor rendered for a cluster without monitoring.coreos.com/v1")
		}
	}
	found := false
	for _, o := range render(t, false, append(on, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")...) {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		found = true
		endpoints, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		if len(endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints %v", endpoints)
		}
		port := endpoints[0].(map[string]any)["port"].(string)
		if port != "https-metrics" || endpoints[0].(map[string]any)["scheme"] != "https" {
			t.Errorf("ServiceMonitor scrapes port %q with scheme %v, want https-metrics over https", port, endpoints[0].(map[string]any)["scheme"])
		}
	}
	if !found {
		t.Error("no ServiceMonitor rendered where monitoring.coreos.com/v1 exists")
	}

	raw, err := os.ReadFile(filepath.Join(framework.ChartDir(), "files", "grafana", "dtnflow-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	metrics.Register(func(context.Context) ([]dtnflowv1alpha1.TransferJob, error) { return nil, nil })
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, f := range families {
		known[f.GetName()] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			known[f.GetName()+suffix] = f.GetType() == dto.MetricType_HISTOGRAM
		}
	}
	// vectors without a series are not gathered: name them from the package
	for _, name := range []string{"dtnflow_bytes_moved_total", "dtnflow_transferjob_verified_bytes_total", "dtnflow_transferjob_predicted_bytes_per_second",
		"dtnflow_replans_total", "dtnflow_agent_failures_total", "dtnflow_transferjob_runs_total", "dtnflow_transferjob_duration_seconds_bucket"} {
		known[name] = true
	}
	name := regexp.MustCompile(`dtnflow_[a-z_]+`)
	exprs := 0
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			exprs++
			for _, m := range name.FindAllString(target.Expr, -1) {
				if !known[m] {
					t.Errorf("panel %q asks for %s, which the manager does not export", p.Title, m)
				}
			}
		}
	}
	if exprs < 10 {
		t.Errorf("the dashboard has %d queries", exprs)
	}
}
