package driver

// Unregister removes a client id registered with Register. Tests that
// register a fake client use it in t.Cleanup, so the fake never reaches a
// matrix run in the same test binary (TestMatrix runs every registered
// client by default).
func Unregister(client string) {
	regMu.Lock()
	defer regMu.Unlock()
	delete(registry, client)
}
