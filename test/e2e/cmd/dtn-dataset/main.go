// Command dtn-dataset makes the mixed datasets of the e2e tests and `make demo`, and
// compares a transferred copy with its source file by file (SHA-256).
//
//	dtn-dataset generate -out DIR [-seed 1] [-large 4] [-large-mib 64] [-medium 8] [-small 300] [-empty 3]
//	dtn-dataset compare SOURCE-DIR DESTINATION-DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/dtnflow/dtnflow/test/dataset"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "generate":
		fs := flag.NewFlagSet("generate", flag.ExitOnError)
		out := fs.String("out", "", "folder to create (must not exist)")
		seed := fs.Uint64("seed", 1, "seed of names, sizes and contents")
		large := fs.Int("large", 4, "number of large files")
		largeMiB := fs.Int64("large-mib", 64, "size of each large file in MiB")
		medium := fs.Int("medium", 8, "number of 1-8 MiB files")
		small := fs.Int("small", 300, "number of 1-256 KiB files")
		empty := fs.Int("empty", 3, "number of empty files")
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			fail("generate: -out is required")
		}
		spec := framework.DatasetSpec{Seed: *seed, Large: *large, LargeBytes: *largeMiB << 20, Medium: *medium, Small: *small, Empty: *empty}
		if err := spec.Write(*out); err != nil {
			fail("generate: %v", err)
		}
		fmt.Printf("dataset %s: %d files, %.1f MiB\n", *out, len(spec.Files()), float64(spec.Bytes())/(1<<20))
	case "compare":
		if len(os.Args) != 4 {
			usage()
		}
		src, err := dataset.Digests(os.Args[2])
		if err != nil {
			fail("compare: %v", err)
		}
		if len(src) == 0 {
			fail("compare: %s holds no files: nothing to compare", os.Args[2])
		}
		dst, err := dataset.Digests(os.Args[3])
		if err != nil {
			fail("compare: %v", err)
		}
		if diff := dataset.CompareDigests(src, dst); diff != "" {
			fail("compare: %s and %s differ:\n%s", os.Args[2], os.Args[3], diff)
		}
		paths := make([]string, 0, len(src))
		for p := range src {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		fmt.Printf("all %d files identical (SHA-256), e.g. %s %s\n", len(src), src[paths[0]][:16], paths[0])
	default:
		usage()
	}
}

func usage() {
	fail("usage: dtn-dataset generate -out DIR [flags] | dtn-dataset compare SOURCE DESTINATION")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dtn-dataset: "+format+"\n", args...)
	os.Exit(1)
}
