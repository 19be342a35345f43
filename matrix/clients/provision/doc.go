// Package provision builds and caches the toolchain-specific parts of the
// matrix's out-of-process client drivers (matrix/clients/python,
// matrix/clients/java) on first use: a directory under the cache
// ($CASCADE_CACHE_DIR, default os.UserCacheDir()/cascade) keyed by a hash
// of exactly what went into it, filled once under a file lock so that
// parallel test binaries build it once, and marked complete only when the
// build succeeded.
//
//	key, _ := provision.Hash(sources, "python 3.11.7")
//	dir := filepath.Join(cache, "python", "venv-"+key[:16])
//	built, err := provision.Once(ctx, dir, key, func(dir string) error { ... })
//
// A missing toolchain is an error wrapping ErrToolMissing whose message
// names what to install.
package provision
