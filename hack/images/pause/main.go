// Command pause is the pod sandbox image of the local cluster: it waits for SIGTERM or
// SIGINT and reaps the zombies of the pod's shared PID namespace meanwhile. No registry
// is reachable on our machines, so the usual registry.k8s.io/pause cannot be pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
