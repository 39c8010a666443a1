import XCTest
import GeoCore
import GeoDBus
import GeoConsentAPI

/// The core decides errors without knowing their bus names; GeoConsentAPI gives
/// each the name docs/dbus-api.md lists ("Errors") and keeps the core's message.
final class CoreErrorNameTests: XCTestCase {
    func testEveryCoreErrorHasItsContractName() {
        let table: [(CoreError, String)] = [
            (.notAuthorized, "org.geoconsent.GeoConsent1.Error.NotAuthorized"),
            (.noAgent, "org.geoconsent.GeoConsent1.Error.NoAgent"),
            (.agentExists, "org.geoconsent.GeoConsent1.Error.AgentExists"),
            (.promptPending, "org.geoconsent.GeoConsent1.Error.PromptPending"),
            (.accessDenied("only root"), "org.freedesktop.DBus.Error.AccessDenied"),
            (.invalidArgs("no such agent"), "org.freedesktop.DBus.Error.InvalidArgs"),
        ]
        for (error, name) in table {
            XCTAssertEqual(error.dbusName, name)
            XCTAssertEqual(error.dbusError, DBusError(name, error.message))
        }
        XCTAssertEqual(CoreError.accessDenied("only root").dbusError.message, "only root")
        XCTAssertEqual(GeoConsentAPI.ErrorName.notAuthorized, CoreError.notAuthorized.dbusName)
    }
}
