import XCTest
final class GeoDBusTestsPlaceholder: XCTestCase { func testPlaceholder() { XCTAssertTrue(true) } }
