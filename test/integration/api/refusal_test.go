package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The validation tables apply every kind of invalid object to the real API server, for
// real (not as a dry run), and check three things for each row: the write is refused as
// Invalid; the error names the field that row breaks and says what its check says; and
// nothing else is named, so the row breaks only what it claims to. coverage_test.go
// checks that the rows together break every check the CRDs declare.
//
// Nothing invalid reaches the controller: a controller learns of objects only through a
// list or a watch of what is stored. Each table opens a watch on its resource before its
// first row and makes one valid write (the sentinel) after its last; watch events arrive
// in the order of the writes, so when the sentinel's event is the only one that arrived,
// no refused row stored anything a controller (or anyone else) could have seen.

// validationCase is one way to break one check: a change to a valid object, the check
// it breaks, the field the API server must name and words its message must contain.
type validationCase struct {
	name   string
	mutate func(object)
	// check is what the row breaks, as coverage_test.go names the CRD's checks: a schema
	// keyword (minimum, maxLength, enum, required, int32, date-time, unique …) or "rule"
	// for a CEL rule, whose message is then want. Empty marks a check the API server
	// makes of every object (metadata.name, value types), which no CRD declares.
	check string
	field string
	want  string
	// alsoNamed is a field the API server may name besides field, for the few breaks
	// that cannot be made alone (a port above 65535 is also above any last port).
	alsoNamed string
}

// acceptedCase is a valid object at a limit: it must be accepted.
type acceptedCase struct {
	name   string
	mutate func(object)
}

// operation is how a table's rows reach the API server.
type operation int

const (
	opCreate       operation = iota // create a new object
	opUpdate                        // update the spec of a stored object
	opUpdateStatus                  // update the status of a stored object
)

// validationTable is the rows of one kind and one operation.
type validationTable struct {
	kind string
	op   operation
	// base is a valid object; rows change a copy of it.
	base     func() object
	refused  []validationCase
	accepted []acceptedCase
	// sentinel makes the valid change of status written after the last row (opUpdateStatus).
	sentinel func(object)
}

// watchTimeout bounds the wait for the sentinel's watch event.
const watchTimeout = 30 * time.Second

// notCheckedNote is the API server's note that CEL rules were skipped because the object
// already broke a schema check; it names no field.
const notCheckedNote = "some validation rules were not checked"

func resourceOf(kind string) schema.GroupVersionResource {
	plural := strings.ToLower(kind) + "s"
	if strings.HasSuffix(kind, "s") { // TransferPriorityClass
		plural = strings.ToLower(kind) + "es"
	}
	return schema.GroupVersionResource{Group: "dtnflow.io", Version: "v1alpha1", Resource: plural}
}

func runValidationTable(t *testing.T, tbl validationTable) {
	t.Helper()
	ctx := context.Background()
	base := toUnstructured(tbl.base())
	// For updates the base is stored first; every row then changes that stored object
	// with its resourceVersion, which a refused row leaves as it was.
	if tbl.op != opCreate {
		status, hasStatus := base.Object["status"]
		if err := env.Client.Create(ctx, base); err != nil {
			t.Fatalf("creating the base object: %v", err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), base) })
		if tbl.op == opUpdateStatus && hasStatus {
			base.Object["status"] = deepCopy(status)
			if err := env.Client.Status().Update(ctx, base); err != nil {
				t.Fatalf("the valid base status is refused: %v", err)
			}
		}
	}
	write := func(obj *unstructured.Unstructured, dryRun bool) error {
		var dry []string
		if dryRun {
			dry = []string{metav1.DryRunAll}
		}
		switch tbl.op {
		case opCreate:
			return env.Client.Create(ctx, obj, &client.CreateOptions{DryRun: dry})
		case opUpdate:
			return env.Client.Update(ctx, obj, &client.UpdateOptions{DryRun: dry})
		default:
			return env.Client.Status().Update(ctx, obj, &client.SubResourceUpdateOptions{UpdateOptions: client.UpdateOptions{DryRun: dry}})
		}
	}
	mutated := func(mutate func(object)) *unstructured.Unstructured {
		obj := base.DeepCopy()
		mutate(obj.Object)
		return obj
	}

	// The unchanged object must be accepted, or every row would pass for the wrong reason.
	if err := write(base.DeepCopy(), true); err != nil {
		t.Fatalf("the valid base object is refused: %v", err)
	}
	events := watchFrom(t, tbl.kind, base.GetNamespace())

	for _, tc := range tbl.refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			obj := mutated(tc.mutate)
			err := write(obj, false)
			if err == nil {
				if tbl.op == opCreate {
					_ = env.Client.Delete(ctx, obj)
				}
				t.Fatalf("accepted; want %s refused: %s", tc.field, tc.want)
			}
			if problem := refusalProblem(err, tc.field, tc.alsoNamed, tc.want); problem != "" {
				t.Errorf("%s\n%v", problem, err)
			}
		})
	}
	for _, tc := range tbl.accepted {
		t.Run("accepted/"+tc.name, func(t *testing.T) {
			if err := write(mutated(tc.mutate), true); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}

	// The sentinel: one valid write, whose event must be the only one.
	sentinel := base.DeepCopy()
	switch tbl.op {
	case opCreate:
		sentinel.SetName("sentinel-" + strings.ToLower(tbl.kind))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sentinel) })
	case opUpdate:
		sentinel.SetAnnotations(map[string]string{"dtnflow.io/test": "sentinel"})
	case opUpdateStatus:
		tbl.sentinel(sentinel.Object)
	}
	if err := write(sentinel, false); err != nil {
		t.Fatalf("the sentinel write is refused: %v", err)
	}
	events.expectOnly(t, sentinel.GetResourceVersion())
}

// refusalProblem says what is wrong with err as the refusal of a write that breaks field
// as want says (and may also break also), or "" when nothing is.
func refusalProblem(err error, field, also, want string) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return "not refused as Invalid"
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return "no causes"
	}
	named := false
	for _, c := range details.Causes {
		if strings.Contains(c.Message, notCheckedNote) {
			continue
		}
		if !causeNames(c, field) && (also == "" || !causeNames(c, also)) {
			return fmt.Sprintf("a cause names %q, not %q: %s", c.Field, field, c.Message)
		}
		if strings.Contains(c.Message, want) {
			named = true
		}
	}
	if !named {
		return fmt.Sprintf("no cause naming %s says %q", field, want)
	}
	return ""
}

// causeNames says whether a cause is about field: it names it or a part of it as its
// field, or, for an integer out of its format's range (which the API server reports
// without a field, or naming status and the rest of the path in its message), at the
// end of its message.
func causeNames(c metav1.StatusCause, field string) bool {
	if c.Field == field || strings.HasPrefix(c.Field, field+".") || strings.HasPrefix(c.Field, field+"[") {
		return true
	}
	in := " in " + field
	if c.Field != "" && c.Field != "<nil>" {
		in = " in " + strings.TrimPrefix(field, c.Field+".")
	}
	return strings.HasSuffix(c.Message, in)
}

// watchedEvents collects the events of a watch opened before a table's first row.
type watchedEvents struct {
	w watch.Interface
}

func watchFrom(t *testing.T, kind, namespace string) *watchedEvents {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(resourceOf(kind)).Namespace(namespace)
	list, err := res.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := res.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &watchedEvents{w: w}
}

// expectOnly waits for the event of the write at resourceVersion rv and fails naming
// every other event that came first.
func (e *watchedEvents) expectOnly(t *testing.T, rv string) {
	t.Helper()
	timeout := time.After(watchTimeout)
	for {
		select {
		case ev, ok := <-e.w.ResultChan():
			if !ok {
				t.Fatal("the watch closed before the sentinel's event")
			}
			obj, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				t.Fatalf("watch event %s of %T", ev.Type, ev.Object)
			}
			if obj.GetResourceVersion() == rv {
				return
			}
			t.Errorf("a refused write reached the watch: %s %s (resourceVersion %s)", ev.Type, obj.GetName(), obj.GetResourceVersion())
		case <-timeout:
			t.Fatalf("no watch event for the sentinel write within %s", watchTimeout)
		}
	}
}
