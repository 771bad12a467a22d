package storage

import (
	"container/list"
	"sync"

	"github.com/isobar-mq/isobar/bookie/vfs"
)

// fileCache keeps a bounded number of open files, keyed by K. Handles are
// reference counted: a file in use is never closed under its user, and a
// file evicted (or removed from disk) while in use closes when released.
type fileCache[K comparable] struct {
	max int

	mu     sync.Mutex // guards the fields below
	files  map[K]*cachedFile[K]
	lru    list.List // *cachedFile, most recently used at the front
	closed bool
}

type cachedFile[K comparable] struct {
	key  K
	f    vfs.File
	refs int
	elem *list.Element // nil once evicted
}

func newFileCache[K comparable](max int) *fileCache[K] {
	return &fileCache[K]{max: max, files: map[K]*cachedFile[K]{}}
}

// acquire returns the open file for k, opening it with open if needed. The
// caller must release it.
func (c *fileCache[K]) acquire(k K, open func() (vfs.File, error)) (*cachedFile[K], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cf, ok := c.files[k]; ok {
		cf.refs++
		c.lru.MoveToFront(cf.elem)
		return cf, nil
	}
	f, err := open()
	if err != nil {
		return nil, err
	}
	cf := &cachedFile[K]{key: k, f: f, refs: 1}
	cf.elem = c.lru.PushFront(cf)
	c.files[k] = cf
	c.trimLocked()
	return cf, nil
}

// insert adds an open file for k unless one is cached already, in which
// case f is closed and the cached one returned. Either way the caller holds
// a reference. It lets callers do slow work (creating a file) outside the
// cache's lock.
func (c *fileCache[K]) insert(k K, f vfs.File) (*cachedFile[K], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		f.Close()
		return nil, ErrClosed
	}
	if cf, ok := c.files[k]; ok {
		f.Close()
		cf.refs++
		c.lru.MoveToFront(cf.elem)
		return cf, nil
	}
	cf := &cachedFile[K]{key: k, f: f, refs: 1}
	cf.elem = c.lru.PushFront(cf)
	c.files[k] = cf
	c.trimLocked()
	return cf, nil
}

// trimLocked closes least recently used idle files beyond the bound.
func (c *fileCache[K]) trimLocked() {
	for e := c.lru.Back(); e != nil && len(c.files) > c.max; {
		prev := e.Prev()
		if cf := e.Value.(*cachedFile[K]); cf.refs == 0 {
			c.dropLocked(cf)
		}
		e = prev
	}
}

func (c *fileCache[K]) dropLocked(cf *cachedFile[K]) {
	delete(c.files, cf.key)
	c.lru.Remove(cf.elem)
	cf.elem = nil
	if cf.refs == 0 {
		cf.f.Close()
	}
}

func (c *fileCache[K]) release(cf *cachedFile[K]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.refs--
	if cf.refs == 0 && cf.elem == nil {
		cf.f.Close()
	}
}

// evict forgets k's file; it closes once its last user releases it.
func (c *fileCache[K]) evict(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cf, ok := c.files[k]; ok {
		c.dropLocked(cf)
	}
}

// close evicts everything and refuses further acquires.
func (c *fileCache[K]) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, cf := range c.files {
		c.dropLocked(cf)
	}
}
