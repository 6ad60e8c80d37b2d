package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
)

// planInput is what `dtnflow-agent plan` reads: the TransferJob's tuning, probe
// samples (as in TransferJob status.samples, or as `dtnflow-agent probe` prints them),
// the nodes of each side with their capacities, and the dataset.
type planInput struct {
	Tuning              v1alpha1.TransferTuning `json:"tuning"`
	Samples             []v1alpha1.ProbeSample  `json:"samples"`
	SourceNodes         []planNode              `json:"sourceNodes"`
	DestinationNodes    []planNode              `json:"destinationNodes"`
	ExternalDestination bool                    `json:"externalDestination,omitempty"`
	Dataset             *contract.Dataset       `json:"dataset,omitempty"`
	RTTMicros           int64                   `json:"rttMicros,omitempty"`
}

type planNode struct {
	Name                string `json:"name"`
	NICBitsPerSecond    int64  `json:"nicBitsPerSecond"`
	CPUBudgetMillicores int64  `json:"cpuBudgetMillicores,omitempty"`
	DiskBitsPerSecond   int64  `json:"diskBitsPerSecond,omitempty"`
	MaxStripes          int    `json:"maxStripes,omitempty"`
}

// planOutput carries the plan under the name it has in TransferJob status, and the
// directive the coordinator would get.
type planOutput struct {
	Plan      v1alpha1.TransferPlan `json:"plan"`
	Directive contract.Directive    `json:"directive"`
}

// runPlan is the what-if tool: the same planner the controller uses
// (controllers/planning), from JSON in to the plan as TransferJob status shows it.
func runPlan(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("plan", "plan [--in input.json] [--samples probe.jsonl] [--nic-rate 10G] [--root DIR --path P...]")
	in := fs.String("in", "", "input JSON (tuning, samples, sourceNodes, destinationNodes, dataset, rttMicros); - or empty for none")
	samplesFile := fs.String("samples", "", "probe samples as JSON lines (the output of dtnflow-agent probe), added to the input's")
	var nic rateFlag
	fs.Var(&nic, "nic-rate", "when the input names no nodes: one node per side with this NIC capacity, e.g. 10G")
	rootDir := fs.String("root", "", "with --path: list the dataset under this root for the size classes")
	paths := fs.StringArray("path", nil, "dataset path under --root (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var pin planInput
	if *in != "" {
		var b []byte
		var err error
		if *in == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(*in)
		}
		if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pin); err != nil {
			return fmt.Errorf("--in %s: %w", *in, err)
		}
	}
	if *samplesFile != "" {
		f, err := os.Open(*samplesFile)
		if err != nil {
			return fmt.Errorf("--samples: %w", err)
		}
		defer f.Close()
		dec := json.NewDecoder(f)
		for {
			var s v1alpha1.ProbeSample
			if err := dec.Decode(&s); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("--samples %s: %w", *samplesFile, err)
			}
			pin.Samples = append(pin.Samples, s)
		}
	}
	if len(pin.SourceNodes) == 0 && len(pin.DestinationNodes) == 0 {
		if nic <= 0 {
			nic = 10e9
		}
		pin.SourceNodes = []planNode{{Name: "source", NICBitsPerSecond: int64(nic)}}
		pin.DestinationNodes = []planNode{{Name: "destination", NICBitsPerSecond: int64(nic)}}
	}
	if len(*paths) > 0 {
		root, err := openRoot(*rootDir)
		if err != nil {
			return err
		}
		ds, err := coord.ListDataset(root, *paths)
		if err != nil {
			return err
		}
		pin.Dataset = &ds
	}
	nodes := func(ns []planNode) []planning.Node {
		var out []planning.Node
		for _, n := range ns {
			out = append(out, planning.Node{Name: n.Name, NICBitsPerSecond: n.NICBitsPerSecond, CPUBudgetMillicores: n.CPUBudgetMillicores,
				DiskBitsPerSecond: n.DiskBitsPerSecond, MaxStripes: n.MaxStripes})
		}
		return out
	}
	plan, err := planning.Plan(planning.Input{Tuning: pin.Tuning, Samples: pin.Samples, SourceNodes: nodes(pin.SourceNodes),
		DestinationNodes: nodes(pin.DestinationNodes), ExternalDestination: pin.ExternalDestination, Dataset: pin.Dataset,
		RTT: time.Duration(pin.RTTMicros) * time.Microsecond})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(planOutput{Plan: plan, Directive: planning.Directive(plan, pin.Tuning.Limits)})
}
