package api

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dtnflow/dtnflow/test/integration/framework"
)

// schemaChecks lists every check the generated CRD of kind asks the API server to make,
// one string each: the path of the field the server names when the check fails, then the
// check — a keyword (maxLength, enum, required …) or "rule: <message>" for a CEL rule.
// Paths are written as the API server writes them, with [*] for any list index or map key.
func schemaChecks(t *testing.T, kind string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if crd.Spec.Names.Kind != kind {
			continue
		}
		if len(crd.Spec.Versions) != 1 {
			t.Fatalf("%s: %d versions; the coverage check knows one", f, len(crd.Spec.Versions))
		}
		out := map[string]bool{}
		walkSchema(*crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "", out)
		return out
	}
	t.Fatalf("no CRD of kind %s", kind)
	return nil
}

func walkSchema(s apiextensionsv1.JSONSchemaProps, path string, out map[string]bool) {
	add := func(field, check string) { out[strings.TrimPrefix(field, ".")+" "+check] = true }
	if s.Minimum != nil {
		add(path, "minimum")
	}
	if s.Maximum != nil {
		add(path, "maximum")
	}
	if s.MinLength != nil {
		add(path, "minLength")
	}
	if s.MaxLength != nil {
		add(path, "maxLength")
	}
	if s.MinItems != nil {
		add(path, "minItems")
	}
	if s.MaxItems != nil {
		add(path, "maxItems")
	}
	if s.MinProperties != nil {
		add(path, "minProperties")
	}
	if s.MaxProperties != nil {
		add(path, "maxProperties")
	}
	if s.Pattern != "" {
		add(path, "pattern")
	}
	if len(s.Enum) > 0 {
		add(path, "enum")
	}
	if s.Format == "int32" && (s.Minimum == nil || s.Maximum == nil) {
		add(path, "int32")
	}
	if s.Format == "date-time" {
		add(path, "date-time")
	}
	if s.XListType != nil && (*s.XListType == "map" || *s.XListType == "set") {
		add(path, "unique")
	}
	for _, r := range s.XValidations {
		add(path+r.FieldPath, "rule: "+r.Message)
	}
	for _, name := range s.Required {
		add(path+"."+name, "required")
	}
	for name, p := range s.Properties {
		if path == "" && name == "metadata" {
			continue
		}
		walkSchema(p, path+"."+name, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(*s.Items.Schema, path+"[*]", out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(*s.AdditionalProperties.Schema, path+"[*]", out)
	}
}

// TestEveryCheckHasARow fails when a check of a CRD has no row in the validation tables
// that breaks it — so a new marker or CEL rule comes with its row — and when a row
// claims a check the CRD does not declare.
func TestEveryCheckHasARow(t *testing.T) {
	covered := map[string]map[string]bool{}
	for _, tbl := range allTables() {
		if covered[tbl.kind] == nil {
			covered[tbl.kind] = map[string]bool{}
		}
		for _, row := range tbl.refused {
			if row.check != "" {
				covered[tbl.kind][row.checkKey()] = true
			}
		}
	}
	for _, kind := range []string{"TransferJob", "TransferEndpoint", "PathProfile", "TransferPriorityClass", "TransferPeer", "RemoteSite", "RemoteTransfer"} {
		checks := schemaChecks(t, kind)
		for _, c := range sortedKeys(checks) {
			if !covered[kind][c] {
				t.Errorf("%s: no row breaks %q", kind, c)
			}
		}
		for _, c := range sortedKeys(covered[kind]) {
			if !checks[c] {
				t.Errorf("%s: a row breaks %q, which the CRD does not declare", kind, c)
			}
		}
		t.Logf("%s: %d checks in the CRD", kind, len(checks))
	}
}

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// checkKey is the check a row breaks, written as schemaChecks writes it.
func (c validationCase) checkKey() string {
	path := listIndex.ReplaceAllString(c.field, "[*]")
	switch c.check {
	case "unique": // the API server names the duplicate item; the check is the list's
		return strings.TrimSuffix(path, "[*]") + " unique"
	case "rule":
		return path + " rule: " + c.want
	default:
		return path + " " + c.check
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
