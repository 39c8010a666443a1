import XCTest
final class GeoSystemTestsPlaceholder: XCTestCase { func testPlaceholder() { XCTAssertTrue(true) } }
