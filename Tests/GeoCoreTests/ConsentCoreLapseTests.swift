import XCTest
@testable import GeoCore

/// Decisions that lapse when unused (docs/dbus-api.md "Decisions that
/// lapse"), with the clock injected: the rig's `now` moves by days.
final class ConsentCoreLapseTests: XCTestCase {
    typealias W = Who
    static let day: UInt64 = 86_400_000_000

    private func lapseConfig(_ days: UInt32 = 90, apps: [String: AppPolicy] = [:]) -> Config {
        var c = Config()
        c.unusedLapseDays = days
        c.apps = apps
        return c
    }

    func testAnUnusedDecisionLapsesAfterItsDaysAndIsListed() {
        let rig = Rig(config: lapseConfig(), lapse: true)
        rig.decide(W.maps1, "allow-while-using")
        rig.approveTap(W.weather)
        rig.leave(W.maps1)
        rig.leave(W.weather)
        let decided = rig.now

        // 89 days and a bit later: nothing lapses yet, and the wake-up is armed for the 90th day.
        rig.now = decided + 89 * Self.day
        let early = rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
        XCTAssertTrue(early.contains(.wakeUp(at: decided + 90 * Self.day)), "\(early)")

        rig.now = decided + 90 * Self.day
        let out = rig.send(.wokeUp)
        XCTAssertTrue(out.saves.contains(true), "a lapse is saved as a decision is")
        let maps = rig.record(W.maps1)
        XCTAssertNil(maps?.decision)
        XCTAssertEqual(maps?.lapsed, "when-in-use")
        XCTAssertEqual(maps?.lapsedAt, rig.now)
        XCTAssertEqual(rig.record(W.weather)?.lapsed, "one-time-approved")
        XCTAssertEqual(rig.record(W.weather)?.oneTimeApproved, false)
        XCTAssertEqual(rig.core.lapseNotes.count, 2)
        XCTAssertEqual(rig.core.lapseNotes.first?.description,
                       "decisions lapsed: uid 1000, unused since 2023-11-14 (90 days), when-in-use: app \"org.example.Maps\"")
        // Not determined again: the standard prompt is shown, and ListConsents still lists the lapse.
        XCTAssertEqual(rig.ask(W.maps2).confirm?.kind, .whenInUse)
        guard case .consents(let list)? = rig.manage(W.aliceCtl, .listConsents).reply else { return XCTFail("no list") }
        XCTAssertTrue(list.contains { $0.0 == W.maps1.app && $0.1.lapsed == "when-in-use" })
    }

    func testUseKeepsADecisionAndANewDecisionClearsTheLapse() {
        let rig = Rig(config: lapseConfig(10), lapse: true)
        rig.decide(W.maps1, "allow-while-using")
        rig.leave(W.maps1)
        // Used on day 8 by a new session that the stored decision grants.
        rig.now += 8 * Self.day
        _ = rig.auth(W.maps2)
        rig.leave(W.maps2)
        rig.now += 9 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse, "used 9 days ago, not 10")
        rig.now += 1 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.lapsed, "when-in-use")
        // The user decides again: the lapse is forgotten.
        rig.decide(W.maps3, "deny")
        XCTAssertEqual(rig.record(W.maps1)?.decision, .denied)
        XCTAssertEqual(rig.record(W.maps1)?.lapsed, "")
        XCTAssertEqual(rig.record(W.maps1)?.lapsedAt, 0)
    }

    func testPolicyNeverLapsesAndZeroDaysMeansForever() {
        // What would lapse at any other setting (a denial never lapses at all).
        let forever = Rig(config: lapseConfig(0), lapse: true)
        forever.decide(W.maps1, "allow-while-using")
        forever.leave(W.maps1)
        forever.now += 10_000 * Self.day
        let out = forever.send(.wokeUp)
        XCTAssertEqual(forever.record(W.maps1)?.decision, .whenInUse)
        XCTAssertEqual(forever.record(W.maps1)?.lapsed, "")
        XCTAssertFalse(out.contains { if case .wakeUp(at: _?) = $0 { return true } else { return false } })

        // A config `always` is no stored decision: it still grants after any time.
        let always = Caller(session: ":1.50", uid: 0, pid: 50, appID: "/usr/libexec/fleet", executable: "/usr/libexec/fleet")
        let rig = Rig(config: lapseConfig(1, apps: ["/usr/libexec/fleet": .always]), lapse: true)
        rig.now += 400 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.tap(always).status, .always)
    }

    func testRecordsWithoutTimesNeverLapse() {
        let rig = Rig(config: lapseConfig(1), records: stored((W.maps1, ConsentRecord(decision: .whenInUse))), lapse: true)
        rig.now += 1000 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
    }

    func testADenialNeverLapsesButTheButtonsConfirmationBesideItDoes() {
        let rig = Rig(config: lapseConfig(10), lapse: true)
        rig.approveTap(W.maps1)
        rig.leave(W.maps1)
        rig.decide(W.maps2, "deny")
        rig.decide(W.weather, "deny")
        rig.leave(W.maps2)
        rig.leave(W.weather)
        rig.now += 11 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.weather)?.decision, .denied)
        XCTAssertEqual(rig.record(W.weather)?.lapsed, "")
        XCTAssertEqual(rig.record(W.maps1)?.decision, .denied, "Don't Allow stays")
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, false)
        XCTAssertEqual(rig.record(W.maps1)?.lapsed, "one-time-approved")
        XCTAssertEqual(rig.tap(W.maps3).confirm?.kind, .oneTime, "the button asks again")
    }

    func testAnAppHoldingAGrantNowIsInUseAndLapsesOnlyASpanAfterItLeaves() {
        let rig = Rig(config: lapseConfig(10), lapse: true)
        rig.decide(W.maps1, "allow-while-using")
        rig.now += 11 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, rig.now, "holding a grant is a use, from today")
        rig.leave(W.maps1)
        rig.now += 9 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
        rig.now += 1 * Self.day
        rig.send(.wokeUp)
        XCTAssertEqual(rig.record(W.maps1)?.lapsed, "when-in-use")
    }

    func testTheDayOfTheJournalLine() {
        XCTAssertEqual(LapseNote.day(0), "1970-01-01")
        XCTAssertEqual(LapseNote.day(951_782_400_000_000), "2000-02-29")
        XCTAssertEqual(LapseNote.day(1_700_000_000_000_000), "2023-11-14")
    }
}
