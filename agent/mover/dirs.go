package mover

import (
	"errors"
	"io/fs"
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
	top    *cachedDir // the root itself
	create bool

	mu   sync.Mutex
	dirs map[string]*cachedDir
}

// cachedDir is a directory under the root: an os.Root for whatever resolves names
// (and says why it failed), and, opened the first time a file is opened or renamed in
// it, the directory's descriptor for the per-file path's single openat or renameat of
// one name (openFile, rename).
type cachedDir struct {
	*os.Root
	// made says this cache created the directory (Mkdir succeeded): it held no file
	// then, so a name the session has not written there is presumed absent.
	made bool

	once sync.Once
	file *os.File // the directory, kept open; nil if it could not be opened
}

const dirCacheMax = 512

func newDirCache(root *os.Root, create bool) *dirCache {
	return &dirCache{top: &cachedDir{Root: root}, create: create, dirs: map[string]*cachedDir{}}
}

// get returns the directory dir under the root, creating it when the cache creates.
func (d *dirCache) get(dir string) (*cachedDir, error) {
	if dir == "." || dir == "" {
		return d.top, nil
	}
	d.mu.Lock()
	c := d.dirs[dir]
	d.mu.Unlock()
	if c != nil {
		return c, nil
	}
	made := false
	if d.create {
		var err error
		if made, err = d.mkdir(dir); err != nil {
			return nil, fsroot.Explain(dir, err)
		}
	}
	r, err := d.top.OpenRoot(dir)
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
		d.dirs = map[string]*cachedDir{}
	}
	c = &cachedDir{Root: r, made: made}
	d.dirs[dir] = c
	return c, nil
}

// mkdir makes dir and whatever parents it lacks; made says this call created dir
// itself, rather than finding it there (or losing the race to another creator).
func (d *dirCache) mkdir(dir string) (made bool, err error) {
	err = d.top.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		if parent := path.Dir(dir); parent != "." {
			if err = d.top.MkdirAll(parent, 0o755); err == nil {
				err = d.top.Mkdir(dir, 0o755)
			}
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil // there already (if not as a directory, opening it says so)
	}
	return false, err
}

// forget drops dir from the cache: the next get resolves it again by name.
func (d *dirCache) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.dirs, dir)
}

// cached returns the directory dir if it is in the cache, else nil (nothing created).
func (d *dirCache) cached(dir string) *cachedDir {
	if dir == "." || dir == "" {
		return d.top
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

// oneName says whether name is a single name in a directory: not empty, not . or ..,
// no slash. Only those take the descriptor's path; anything else goes through the
// os.Root, which resolves it (or refuses it) link by link.
func oneName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return false
		}
	}
	return true
}
