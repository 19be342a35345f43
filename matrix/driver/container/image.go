package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// modulePath identifies the repository root: the directory whose go.mod
// declares it.
const modulePath = "github.com/cascade-kafka/cascade"

// Image is a driver image built from a Dockerfile in docker/, with the
// repository root as its build context.
type Image struct {
	// Repo is the image name without a tag, e.g. "cascade/matrix-python".
	Repo string
	// Dockerfile is the path of the Dockerfile from the repository root.
	Dockerfile string
	// Inputs returns, relative to the repository root, every file the
	// Dockerfile copies into the image, and the Dockerfile itself.
	Inputs func(root string) ([]string, error)
	// BuildArgs maps each base-image build argument to the environment
	// variable that overrides its Dockerfile default.
	BuildArgs map[string]string
	// ImageEnv names a ready image to use instead, skipping hash and build.
	ImageEnv string
}

// Python is the image of both Python clients (docker/python.Dockerfile).
var Python = &Image{
	Repo:       "cascade/matrix-python",
	Dockerfile: "docker/python.Dockerfile",
	Inputs: func(string) ([]string, error) {
		return []string{"docker/python.Dockerfile", "matrix/clients/python/driver.py", "matrix/clients/python/driver_common.py",
			"matrix/clients/python/driver_txn.py", "matrix/clients/python/requirements.txt"}, nil
	},
	BuildArgs: map[string]string{"BASE_IMAGE": "MATRIX_PYTHON_BASE_IMAGE"},
	ImageEnv:  "MATRIX_PYTHON_IMAGE",
}

// Java is the image of the Java client (docker/java.Dockerfile).
var Java = &Image{
	Repo:       "cascade/matrix-java",
	Dockerfile: "docker/java.Dockerfile",
	Inputs: func(root string) ([]string, error) {
		files := []string{"docker/java.Dockerfile", "matrix/clients/java/pom.xml"}
		err := filepath.WalkDir(filepath.Join(root, "matrix/clients/java/src"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		return files, err
	},
	BuildArgs: map[string]string{"BASE_IMAGE": "MATRIX_JAVA_BASE_IMAGE", "BUILD_IMAGE": "MATRIX_JAVA_BUILD_IMAGE"},
	ImageEnv:  "MATRIX_JAVA_IMAGE",
}

// ContextHash returns the first 12 hex digits of the SHA-256 over files,
// read from root in byte order of their paths: each path, a newline, then
// the file's contents. ci/docker-setup.sh computes the same value
// (context_hash), so an image it built is found by the tag ImageTag gives.
func ContextHash(root string, files []string) (string, error) {
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	h := sha256.New()
	for _, f := range sorted {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", fmt.Errorf("container: hash build inputs: %w", err)
		}
		io.WriteString(h, f+"\n")
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ImageTag returns the image's name with the context hash of its inputs
// under root as the tag, e.g. "cascade/matrix-python:d68c53c1fac4".
func (im *Image) ImageTag(root string) (string, error) {
	files, err := im.Inputs(root)
	if err != nil {
		return "", fmt.Errorf("container: list inputs of %s: %w", im.Repo, err)
	}
	sum, err := ContextHash(root, files)
	if err != nil {
		return "", err
	}
	return im.Repo + ":" + sum, nil
}

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory whose go.mod declares this module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			line, _, _ := bytes.Cut(b, []byte("\n"))
			if strings.TrimSpace(strings.TrimPrefix(string(line), "module")) == modulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("container: no %s checkout at or above the working directory to build driver images from; run inside the repository or name ready images with MATRIX_PYTHON_IMAGE / MATRIX_JAVA_IMAGE", modulePath)
		}
		dir = parent
	}
}

var (
	buildMu sync.Mutex              // One image build at a time.
	ready   = map[string]struct{}{} // Images known to exist in this process.
)

// Ensure returns the image to run for im: the one ImageEnv names, else the
// content-hash tag, built first when the engine lacks it. Progress lines go
// to progress.
func (im *Image) Ensure(ctx context.Context, cli client.APIClient, progress io.Writer) (string, error) {
	if name := os.Getenv(im.ImageEnv); name != "" {
		return name, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	tag, err := im.ImageTag(root)
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, ok := ready[tag]; ok {
		return tag, nil
	}
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		ready[tag] = struct{}{}
		return tag, nil
	} else if !isNotFound(err) {
		return "", fmt.Errorf("container: inspect image %s: %w", tag, err)
	}
	if err := im.build(ctx, root, tag, progress); err != nil {
		return "", err
	}
	ready[tag] = struct{}{}
	return tag, nil
}

// build builds tag from im's Dockerfile through testcontainers-go, with the
// host's network so the build reaches the package registries as the host
// does. The build log is kept and its end returned on failure.
func (im *Image) build(ctx context.Context, root, tag string, progress io.Writer) error {
	repo, version, _ := strings.Cut(tag, ":")
	args := map[string]*string{}
	var desc []string
	for arg, env := range im.BuildArgs {
		if v := os.Getenv(env); v != "" {
			args[arg] = &v
			desc = append(desc, arg+"="+v)
		}
	}
	sort.Strings(desc)
	if len(desc) == 0 {
		desc = append(desc, "the Dockerfile's default bases")
	}
	fmt.Fprintf(progress, "container: building %s from %s with %s (first use of these sources; ci/docker-setup.sh prebuilds it)\n", tag, im.Dockerfile, strings.Join(desc, ", "))
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(quietLogger{}))
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	defer provider.Close()
	buildLog := &tail{max: 8 << 10}
	req := &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		Context:        root,
		Dockerfile:     im.Dockerfile,
		Repo:           repo,
		Tag:            version,
		BuildArgs:      args,
		BuildLogWriter: buildLog,
		KeepImage:      true,
		BuildOptionsModifier: func(o *client.ImageBuildOptions) {
			o.NetworkMode = "host"
			o.Labels = map[string]string{"org.cascade.context": version}
		},
	}}
	if _, err := provider.BuildImage(ctx, req); err != nil {
		return fmt.Errorf("container: build %s from %s: %w; on a machine without an image registry run ci/docker-setup.sh, or set %s to base images that exist; end of the build log:\n%s",
			tag, im.Dockerfile, err, strings.Join(sortedValues(im.BuildArgs), " / "), buildLog.String())
	}
	return nil
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
