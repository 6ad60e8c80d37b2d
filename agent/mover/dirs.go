package mover

import (
	"os"
	"path"
	"sync"

	"github.com/dtnflow/dtnflow/agent/fsroot"
)

// dirCache keeps directories under a root open as os.Roots of their own, so that a
// file in a directory already seen costs one openat (or renameat) instead of a walk
// from the top for every operation. A directory opened this way stays confined to
// the root even if the tree changes later: it was resolved safely once.
type dirCache struct {
	root   *os.Root
	create bool

	mu   sync.Mutex
	dirs map[string]*os.Root
}

const dirCacheMax = 512

func newDirCache(root *os.Root, create bool) *dirCache {
	return &dirCache{root: root, create: create, dirs: map[string]*os.Root{}}
}

// get returns the directory dir under the root, creating it when the cache creates.
func (d *dirCache) get(dir string) (*os.Root, error) {
	if dir == "." || dir == "" {
		return d.root, nil
	}
	d.mu.Lock()
	r := d.dirs[dir]
	d.mu.Unlock()
	if r != nil {
		return r, nil
	}
	if d.create {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return nil, fsroot.Explain(dir, err)
		}
	}
	r, err := d.root.OpenRoot(dir)
	if err != nil {
		return nil, fsroot.Explain(dir, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.dirs[dir]; old != nil {
		r.Close()
		return old, nil
	}
	if len(d.dirs) >= dirCacheMax {
		// Forget everything: the directories may still be in use by callers that hold
		// them, so they are left to the garbage collector rather than closed here.
		d.dirs = map[string]*os.Root{}
	}
	d.dirs[dir] = r
	return r, nil
}

// forget drops dir from the cache: the next get resolves it again by name.
func (d *dirCache) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.dirs, dir)
}

// cached returns the directory dir if it is in the cache, else nil (nothing created).
func (d *dirCache) cached(dir string) *os.Root {
	if dir == "." || dir == "" {
		return d.root
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dirs[dir]
}

// split returns the directory and base name of a clean relative path.
func split(p string) (string, string) {
	dir, base := path.Split(p)
	if dir == "" {
		return ".", base
	}
	return dir[:len(dir)-1], base
}
