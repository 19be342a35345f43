package provision

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// FindJava locates a Java runtime of at least major version min:
// $JAVA_HOME/bin/java, else java on PATH. It returns the path and the major
// version.
func FindJava(ctx context.Context, min int) (string, int, error) {
	java := ""
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); isFile(p) {
			java = p
		}
	}
	if java == "" {
		p, err := exec.LookPath("java")
		if err != nil {
			return "", 0, Missing("java not found in PATH or JAVA_HOME; install a Java %d+ JDK (Debian: apt-get install openjdk-17-jdk-headless)", min)
		}
		java = p
	}
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("provision: %s -version: %w: %s", java, err, Tail(string(out), 500))
	}
	major, ok := JavaMajor(string(out))
	if !ok {
		return "", 0, fmt.Errorf("provision: cannot read the Java version from %q", Tail(string(out), 200))
	}
	if major < min {
		return "", 0, Missing("%s is Java %d; the Java driver needs Java %d+ (Debian: apt-get install openjdk-17-jdk-headless)", java, major, min)
	}
	return java, major, nil
}

var javaVersionRE = regexp.MustCompile(`version "([0-9]+)(?:\.([0-9]+))?`)

// JavaMajor parses the major version from `java -version` output, where
// Java 8 and older print "1.8.0_x".
func JavaMajor(s string) (int, bool) {
	m := javaVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	if n == 1 && m[2] != "" {
		if n, err = strconv.Atoi(m[2]); err != nil {
			return 0, false
		}
	}
	return n, true
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
