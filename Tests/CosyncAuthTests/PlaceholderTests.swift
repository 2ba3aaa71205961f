import Testing
import HummingbirdTesting
@Test func placeholder() { #expect(1 == 1) }
