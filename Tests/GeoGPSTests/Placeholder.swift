import XCTest
final class GeoGPSTestsPlaceholder: XCTestCase { func testPlaceholder() { XCTAssertTrue(true) } }
