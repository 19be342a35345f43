package broker_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/internal/certtest"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// TestConformanceSecureBadInput sends badInputCases to an Apache Kafka 4.4
// broker with SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512) and SSL listeners
// configured as TestSecureListenersBadInput's Cascade, and checks Kafka ends
// each connection with the outcome the Cascade test asserts.
func TestConformanceSecureBadInput(t *testing.T) {
	ports, err := cluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	sasl, ssl := addr(0), addr(1)
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost,O=Cascade", "localhost", "127.0.0.1")
	dir := t.TempDir()
	props := saslProps(map[string]string{
		"listeners": "PLAINTEXT://" + apachekafka.PlaintextAddr + ",CONTROLLER://" + apachekafka.ControllerAddr +
			",SASL_PLAINTEXT://" + sasl + ",SSL://" + ssl,
		"advertised.listeners":                    "PLAINTEXT://" + apachekafka.PlaintextAddr + ",SASL_PLAINTEXT://" + sasl + ",SSL://" + ssl,
		"listener.security.protocol.map":          "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
		"listener.name.ssl.ssl.keystore.type":     "PKCS12",
		"listener.name.ssl.ssl.keystore.location": srv.PKCS12(t, dir, "ssl.p12", "ks-pw"),
		"listener.name.ssl.ssl.keystore.password": "ks-pw",
	})
	plain := startOracleWith(t, props)
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-pw"},
	})
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("SCRAM user: %v %+v", err, res)
	}
	addrs := map[string]string{"PLAINTEXT": plain, "SASL_PLAINTEXT": sasl, "SSL": ssl}
	for _, tc := range badInputCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(t, addrs[tc.listener], ca); got != tc.want {
				t.Errorf("Apache Kafka's outcome %q, want %q", got, tc.want)
			}
		})
	}
}
