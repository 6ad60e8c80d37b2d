package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Every object the controller creates for a job has a name derived from the job's name
// alone, so that a restarted manager (or a second pass that has not yet seen its own
// writes) finds what it made instead of making it again. The contract names them
// <job>-coordinator, <job>-s<k>-send, <job>-s<k>-recv and <job>-auth; a job name long
// enough that a child's name would exceed the 253 characters of a DNS subdomain is cut
// and given a hash of the whole name, so distinct jobs still get distinct children.

// longestChildSuffix is the longest suffix namePrefix must leave room for; a stripe's
// "-s<k>-send" stays shorter for every k below 10000, far above what the API allows.
const longestChildSuffix = len("-coordinator")

// hashSuffixLen is the number of hex digits of the hash appended to a cut name.
const hashSuffixLen = 8

// shortHash is the first n hex digits of the SHA-256 of s.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// truncateWithHash returns s when it fits in max characters, and otherwise a prefix of s
// followed by "-" and a hash of all of s, max characters long. The prefix loses any
// trailing '-' or '.', so the result stays a valid DNS subdomain or label value when s
// was one.
func truncateWithHash(s string, max int) string {
	if len(s) <= max {
		return s
	}
	prefix := strings.TrimRight(s[:max-hashSuffixLen-1], "-.")
	return prefix + "-" + shortHash(s, hashSuffixLen)
}

// namePrefix is the part every child of a job starts with.
func namePrefix(jobName string) string {
	return truncateWithHash(jobName, validation.DNS1123SubdomainMaxLength-longestChildSuffix)
}

// CoordinatorPodName is the name of a job's coordinator pod.
func CoordinatorPodName(jobName string) string {
	return namePrefix(jobName) + "-coordinator"
}

// StripeName is the name of stripe k of a job, as listed in status.stripes.
func StripeName(jobName string, stripe int32) string {
	return namePrefix(jobName) + "-s" + strconv.Itoa(int(stripe))
}

// AgentPodName is the name of the pod of one role of stripe k (sender or receiver).
func AgentPodName(jobName string, role contract.Role, stripe int32) string {
	switch role {
	case contract.RoleCoordinator:
		return CoordinatorPodName(jobName)
	case contract.RoleSender:
		return StripeName(jobName, stripe) + "-send"
	default:
		return StripeName(jobName, stripe) + "-recv"
	}
}

// SecretName is the name of a job's shared-secret Secret.
func SecretName(jobName string) string { return namePrefix(jobName) + "-auth" }

// CoordinatorAccountName names the coordinator's ServiceAccount, Role and RoleBinding.
func CoordinatorAccountName(jobName string) string { return CoordinatorPodName(jobName) }

// JobLabelValue is the value of the dtnflow.io/job label for a job: its name, or a cut
// name with a hash when the name is longer than a label value may be.
func JobLabelValue(jobName string) string {
	return truncateWithHash(jobName, validation.LabelValueMaxLength)
}

// PathProfileName is the name of the PathProfile of the path source → destination:
// "<source>.<destination>", cut with a hash when it would be too long.
func PathProfileName(source, destination string) string {
	return truncateWithHash(source+"."+destination, validation.DNS1123SubdomainMaxLength)
}

// PathProfileNameFor is the PathProfile name of a job's path.
func PathProfileNameFor(job *dtnflowv1alpha1.TransferJob) string {
	src, dst := job.Spec.Source.Endpoint, job.Spec.Destination.Endpoint
	if s := job.Spec.Source.Site; s != "" { // a peer's endpoint: its site's name first
		src = s + "." + src
	}
	if s := job.Spec.Destination.Site; s != "" {
		dst = s + "." + dst
	}
	return PathProfileName(src, dst)
}
