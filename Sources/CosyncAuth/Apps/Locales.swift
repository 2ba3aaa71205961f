/// The legacy server's locale list (upper-case two-letter codes; <doc:LegacyImport> Appendix B).
/// Only these codes may appear in an app's `locales`; `EN` is mandatory and always first.
public enum Locales {
    public static let known: Set<String> = Set(
        """
        AB AA AF AK SQ AM AR AN HY AS AV AE AY AZ BM BA EU BE BN BI BS BR BG MY CA CH CE NY ZH CU CV KW CO CR HR \
        CS DA DV NL DZ EN EO ET EE FO FJ FI FR FT FF GD GL LG KA DE EL KL GN GU HT HA HE HZ HI HO HU IS IO IG ID \
        IA IE IU IK GA IT JA JV KN KR KS KK KM KI RW KY KV KG KO KJ KU LO LA LV LI LN LT LU LB MK MG MS ML MT GV \
        MI MR MH MN NA NV ND NR NG NE NO NB NN OC OJ OR OM OS PI PS FA PL PT PA QU RO RM RN RU SE SM SG SA SC SR \
        SN SD SI SK SL SO ST EW SU SW SS SV TL TY TG TA TT TE TH BO TI TO TS TN TR TK TW UG UK UR UZ VE VI VO WA \
        CY WO XH YI YO ZA ZU
        """.split(separator: " ").map(String.init))

    public static let defaultLocale = "EN"
}
