package acl

import (
	"strings"
	"testing"
)

func str(s string) *string { return &s }

// bind parses "TYPE:PATTERN:name principal host OP PERM", e.g.
// "TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW".
func bind(t testing.TB, s string) Binding {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 5 {
		t.Fatalf("bad binding %q", s)
	}
	res := strings.SplitN(f[0], ":", 3)
	b := Binding{Name: res[2], Principal: f[1], Host: f[2]}
	b.ResourceType = ResourceType(index(t, resourceNames[:], res[0]))
	b.Pattern = PatternType(index(t, patternNames[:], res[1]))
	b.Operation = Operation(index(t, operationNames[:], f[3]))
	b.Permission = Permission(index(t, permissionNames[:], f[4]))
	if err := b.Validate(); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return b
}

func index(t testing.TB, names []string, n string) int {
	for i, x := range names {
		if x == n {
			return i
		}
	}
	t.Fatalf("unknown name %q", n)
	return 0
}

func indexOf(t testing.TB, acls ...string) *Index {
	m := map[ID]Binding{}
	for i, s := range acls {
		m[ID{byte(i + 1)}] = bind(t, s)
	}
	return NewIndex(m)
}

var anon = Session{Principal: Anonymous, Host: "127.0.0.1"}

func TestAuthorize(t *testing.T) {
	for _, tc := range []struct {
		name        string
		acls        []string
		super       []string
		allowIfNone bool
		s           Session
		op          Operation
		typ         ResourceType
		res         string
		want        bool
	}{
		{name: "no acls denies", op: Read, typ: Topic, res: "t", want: false},
		{name: "no acls, allow everyone", allowIfNone: true, op: Read, typ: Topic, res: "t", want: true},
		{name: "super user", super: []string{Anonymous}, acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ DENY"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "literal allow", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "literal other name", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW"}, op: Read, typ: Topic, res: "tt", want: false},
		{name: "other acl present, allow everyone does not apply", allowIfNone: true, acls: []string{"TOPIC:LITERAL:t User:bob * READ ALLOW"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "acl on other resource, allow everyone applies", allowIfNone: true, acls: []string{"TOPIC:LITERAL:u User:bob * READ ALLOW"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "literal name is not a prefix", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW"}, op: Read, typ: Topic, res: "tx", want: false},
		{name: "prefixed allow", acls: []string{"TOPIC:PREFIXED:orders- User:ANONYMOUS * WRITE ALLOW"}, op: Write, typ: Topic, res: "orders-eu", want: true},
		{name: "prefixed equal name", acls: []string{"TOPIC:PREFIXED:orders User:ANONYMOUS * WRITE ALLOW"}, op: Write, typ: Topic, res: "orders", want: true},
		{name: "prefixed longer than name", acls: []string{"TOPIC:PREFIXED:orders-eu User:ANONYMOUS * WRITE ALLOW"}, op: Write, typ: Topic, res: "orders", want: false},
		{name: "wildcard allow", acls: []string{"TOPIC:LITERAL:* User:ANONYMOUS * WRITE ALLOW"}, op: Write, typ: Topic, res: "x", want: true},
		{name: "wildcard principal", acls: []string{"TOPIC:LITERAL:t User:* * READ ALLOW"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "deny overrides allow", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS * READ DENY"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "prefixed deny overrides literal allow", acls: []string{"TOPIC:LITERAL:secret-1 User:ANONYMOUS * READ ALLOW", "TOPIC:PREFIXED:secret User:* * READ DENY"}, op: Read, typ: Topic, res: "secret-1", want: false},
		{name: "wildcard deny overrides", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * ALL ALLOW", "TOPIC:LITERAL:* User:ANONYMOUS * WRITE DENY"}, op: Write, typ: Topic, res: "t", want: false},
		{name: "host match", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS 127.0.0.1 READ ALLOW"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "host mismatch", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS 127.0.0.2 READ ALLOW"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "deny from one host only", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS 127.0.0.2 READ DENY"}, op: Read, typ: Topic, res: "t", want: true},
		{name: "deny from this host", s: Session{Anonymous, "127.0.0.2"}, acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS 127.0.0.2 READ DENY"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "read implies describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW"}, op: Describe, typ: Topic, res: "t", want: true},
		{name: "write implies describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * WRITE ALLOW"}, op: Describe, typ: Topic, res: "t", want: true},
		{name: "delete implies describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * DELETE ALLOW"}, op: Describe, typ: Topic, res: "t", want: true},
		{name: "alter implies describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * ALTER ALLOW"}, op: Describe, typ: Topic, res: "t", want: true},
		{name: "create does not imply describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * CREATE ALLOW"}, op: Describe, typ: Topic, res: "t", want: false},
		{name: "describe does not imply read", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * DESCRIBE ALLOW"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "alter configs implies describe configs", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * ALTER_CONFIGS ALLOW"}, op: DescribeConfigs, typ: Topic, res: "t", want: true},
		{name: "deny read does not deny describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * ALL ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS * READ DENY"}, op: Describe, typ: Topic, res: "t", want: true},
		{name: "deny all denies describe", acls: []string{"TOPIC:LITERAL:t User:ANONYMOUS * DESCRIBE ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS * ALL DENY"}, op: Describe, typ: Topic, res: "t", want: false},
		{name: "all allows", acls: []string{"GROUP:LITERAL:g User:ANONYMOUS * ALL ALLOW"}, op: Read, typ: Group, res: "g", want: true},
		{name: "types are separate", acls: []string{"GROUP:LITERAL:t User:ANONYMOUS * ALL ALLOW"}, op: Read, typ: Topic, res: "t", want: false},
		{name: "cluster", acls: []string{"CLUSTER:LITERAL:kafka-cluster User:ANONYMOUS * IDEMPOTENT_WRITE ALLOW"}, op: IdempotentWrite, typ: Cluster, res: ClusterName, want: true},
		{name: "transactional id prefix", acls: []string{"TRANSACTIONAL_ID:PREFIXED:app- User:ANONYMOUS * WRITE ALLOW"}, op: Write, typ: TransactionalID, res: "app-1", want: true},
		{name: "other principal", acls: []string{"TOPIC:LITERAL:t User:alice * READ ALLOW"}, op: Read, typ: Topic, res: "t", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthorizer(tc.super, tc.allowIfNone)
			a.SetIndex(indexOf(t, tc.acls...))
			s := tc.s
			if s == (Session{}) {
				s = anon
			}
			if got := a.Authorize(s, tc.op, tc.typ, tc.res); got != tc.want {
				t.Fatalf("Authorize(%v %v %v %q) = %v, want %v", s, tc.op, tc.typ, tc.res, got, tc.want)
			}
		})
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	for _, tc := range []struct {
		name string
		acls []string
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []string{"TOPIC:LITERAL:t User:ANONYMOUS * WRITE ALLOW"}, true},
		{"literal allow denied by same literal", []string{"TOPIC:LITERAL:t User:ANONYMOUS * WRITE ALLOW", "TOPIC:LITERAL:t User:ANONYMOUS * WRITE DENY"}, false},
		{"literal allow denied by prefix", []string{"TOPIC:LITERAL:abc User:ANONYMOUS * WRITE ALLOW", "TOPIC:PREFIXED:ab User:ANONYMOUS * WRITE DENY"}, false},
		{"prefix allow under a longer deny", []string{"TOPIC:PREFIXED:ab User:ANONYMOUS * WRITE ALLOW", "TOPIC:PREFIXED:abc User:ANONYMOUS * WRITE DENY"}, true},
		{"wildcard deny", []string{"TOPIC:LITERAL:t User:ANONYMOUS * WRITE ALLOW", "TOPIC:LITERAL:* User:ANONYMOUS * WRITE DENY"}, false},
		{"wildcard allow", []string{"TOPIC:LITERAL:* User:* * ALL ALLOW"}, true},
		{"read is not write", []string{"TOPIC:LITERAL:t User:ANONYMOUS * READ ALLOW"}, false},
		{"other host", []string{"TOPIC:LITERAL:t User:ANONYMOUS 10.0.0.1 WRITE ALLOW"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthorizer(nil, false)
			a.SetIndex(indexOf(t, tc.acls...))
			if got := a.AuthorizeByResourceType(anon, Write, Topic); got != tc.want {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}

func TestFilterMatches(t *testing.T) {
	lit := bind(t, "TOPIC:LITERAL:foo User:ANONYMOUS * READ ALLOW")
	wild := bind(t, "TOPIC:LITERAL:* User:ANONYMOUS * READ ALLOW")
	pre := bind(t, "TOPIC:PREFIXED:fo User:ANONYMOUS 1.2.3.4 WRITE DENY")
	grp := bind(t, "GROUP:LITERAL:foo User:bob * READ ALLOW")
	any := Filter{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(mod func(*Filter)) Filter { f := any; mod(&f); return f }
	for _, tc := range []struct {
		name string
		f    Filter
		want [4]bool // lit, wild, pre, grp
	}{
		{"any", any, [4]bool{true, true, true, true}},
		{"topic", with(func(f *Filter) { f.ResourceType = Topic }), [4]bool{true, true, true, false}},
		{"literal", with(func(f *Filter) { f.Pattern = Literal }), [4]bool{true, true, false, true}},
		{"prefixed", with(func(f *Filter) { f.Pattern = Prefixed }), [4]bool{false, false, true, false}},
		{"name any pattern is exact", with(func(f *Filter) { f.Name = str("foo") }), [4]bool{true, false, false, true}},
		{"match foo", with(func(f *Filter) { f.Name = str("foo"); f.Pattern = Match }), [4]bool{true, true, true, true}},
		{"match fox", with(func(f *Filter) { f.Name = str("fox"); f.Pattern = Match }), [4]bool{false, true, true, false}},
		{"literal star", with(func(f *Filter) { f.Name = str("*"); f.Pattern = Literal }), [4]bool{false, true, false, false}},
		{"principal", with(func(f *Filter) { f.Principal = str("User:bob") }), [4]bool{false, false, false, true}},
		{"host", with(func(f *Filter) { f.Host = str("1.2.3.4") }), [4]bool{false, false, true, false}},
		{"operation", with(func(f *Filter) { f.Operation = Write }), [4]bool{false, false, true, false}},
		{"permission", with(func(f *Filter) { f.Permission = Allow }), [4]bool{true, true, false, true}},
	} {
		for i, b := range []Binding{lit, wild, pre, grp} {
			if got := tc.f.Matches(b); got != tc.want[i] {
				t.Errorf("%s: Matches(%s) = %v, want %v", tc.name, b, got, tc.want[i])
			}
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Binding{ResourceType: Topic, Name: "t", Pattern: Literal, Principal: Anonymous, Host: "*", Operation: Read, Permission: Allow}
	for _, tc := range []struct {
		mod  func(*Binding)
		want string
	}{
		{func(*Binding) {}, ""},
		{func(b *Binding) { b.Pattern = Match }, "Invalid patternType MATCH"},
		{func(b *Binding) { b.ResourceType = ResourceAny }, "Invalid resourceType ANY"},
		{func(b *Binding) { b.Operation = OpAny }, "Invalid operation ANY"},
		{func(b *Binding) { b.Permission = PermissionAny }, "Invalid permissionType ANY"},
		{func(b *Binding) { b.Name = "" }, "Invalid empty resource name"},
		{func(b *Binding) { b.ResourceType = Cluster; b.Name = "c" }, "The only valid name for the CLUSTER resource is kafka-cluster"},
		{func(b *Binding) { b.Principal = "bob" }, "Could not parse principal from `bob`"},
	} {
		b := ok
		tc.mod(&b)
		err := b.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%s) = %v, want %q", b, err, tc.want)
		}
	}
}

func TestMatchingOrder(t *testing.T) {
	idx := indexOf(t, "TOPIC:LITERAL:b User:ANONYMOUS * READ ALLOW", "GROUP:LITERAL:a User:ANONYMOUS * READ ALLOW", "TOPIC:LITERAL:a User:ANONYMOUS * READ ALLOW")
	ids := idx.Matching(Filter{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny})
	var got []string
	for _, id := range ids {
		b, _ := idx.Binding(id)
		got = append(got, b.ResourceType.String()+":"+b.Name)
	}
	if strings.Join(got, ",") != "TOPIC:a,TOPIC:b,GROUP:a" {
		t.Fatalf("order %v", got)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	acls := []string{"TOPIC:LITERAL:* User:alice * READ ALLOW", "TOPIC:PREFIXED:secret User:* * ALL DENY"}
	for i := range 200 {
		acls = append(acls, "TOPIC:LITERAL:topic-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+" User:ANONYMOUS * WRITE ALLOW")
		acls = append(acls, "TOPIC:PREFIXED:p"+string(rune('a'+i%26))+strings.Repeat("y", i%5)+" User:ANONYMOUS * READ ALLOW")
	}
	a := NewAuthorizer([]string{"User:admin"}, false)
	a.SetIndex(indexOf(b, acls...))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !a.Authorize(anon, Write, Topic, "topic-xa") {
			b.Fatal("denied")
		}
	}
}
