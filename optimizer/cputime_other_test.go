//go:build !linux

package optimizer

import "testing"

func reportCPU(b *testing.B, body func()) {
	for b.Loop() {
		body()
	}
}
