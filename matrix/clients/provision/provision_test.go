package provision

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
)

func TestHashKeysContent(t *testing.T) {
	a := fstest.MapFS{"pom.xml": {Data: []byte("a")}, "src/D.java": {Data: []byte("b")}}
	b := fstest.MapFS{"pom.xml": {Data: []byte("a")}, "src/D.java": {Data: []byte("c")}}
	ha, err := Hash(a, "java 17")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Hash(a, "java 17"); again != ha {
		t.Fatalf("hash not deterministic: %s vs %s", ha, again)
	}
	for name, other := range map[string]func() (string, error){
		"source changed": func() (string, error) { return Hash(b, "java 17") },
		"extra changed":  func() (string, error) { return Hash(a, "java 21") },
	} {
		h, err := other()
		if err != nil {
			t.Fatal(err)
		}
		if h == ha {
			t.Errorf("%s: hash unchanged", name)
		}
	}
	if Key("ab", "c") == Key("a", "bc") {
		t.Error("Key does not separate its parts")
	}
}

func TestOnceBuildsOnceUnderConcurrency(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "entry")
	var builds atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = Once(context.Background(), dir, "stamp-1", func(d string) error {
				builds.Add(1)
				time.Sleep(50 * time.Millisecond) // Hold the lock while the others wait.
				return os.WriteFile(filepath.Join(d, "out"), []byte("x"), 0o644)
			})
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want 1", n)
	}
	if !Complete(dir, "stamp-1") || Complete(dir, "stamp-2") {
		t.Fatal("completion marker does not hold the stamp")
	}
	built, err := Once(context.Background(), dir, "stamp-2", func(d string) error {
		if _, err := os.Stat(filepath.Join(d, "out")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale output survived a rebuild: %v", err)
		}
		return nil
	})
	if err != nil || !built {
		t.Fatalf("new stamp: built=%v err=%v, want a rebuild", built, err)
	}
}

func TestOnceFailedBuildIsRetried(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "entry")
	boom := errors.New("boom")
	if _, err := Once(context.Background(), dir, "s", func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if Complete(dir, "s") {
		t.Fatal("a failed build was marked complete")
	}
	built, err := Once(context.Background(), dir, "s", func(string) error { return nil })
	if err != nil || !built {
		t.Fatalf("retry: built=%v err=%v", built, err)
	}
}

func TestOnceWaitHonoursContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "entry")
	unlock, err := LockFile(context.Background(), dir+".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = Once(ctx, dir, "s", func(string) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline while the lock is held", err)
	}
}

func TestCacheDirFromEnv(t *testing.T) {
	t.Setenv("CASCADE_CACHE_DIR", "/x/y")
	if d, err := CacheDir(); err != nil || d != "/x/y" {
		t.Fatalf("CacheDir = %q, %v", d, err)
	}
}

func TestJavaMajor(t *testing.T) {
	for in, want := range map[string]int{
		`openjdk version "17.0.15" 2025-04-15`: 17,
		`java version "1.8.0_402"`:             8,
		`openjdk version "21" 2023-09-19`:      21,
	} {
		if got, ok := JavaMajor(in); !ok || got != want {
			t.Errorf("JavaMajor(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	if _, ok := JavaMajor("no version here"); ok {
		t.Error("JavaMajor accepted garbage")
	}
}

func TestFindJavaMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	_, _, err := FindJava(context.Background(), 17)
	if !errors.Is(err, ErrToolMissing) {
		t.Fatalf("err = %v, want ErrToolMissing", err)
	}
}
