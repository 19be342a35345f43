// Package zerocopy sends file bytes to a socket with sendfile(2), the
// zero-copy path Fetch responses take from the page cache (broker/log's
// regions, and broker/wire's progress-tracking writer).
package zerocopy
