"""geoconsent's desktop programs: the consent agent (agent.py), the settings
window (settings.py), and what they share (common.py: the service's names, the
translations, a connection of their own, the text rules). The programs in
/usr/bin are thin launchers (desktop/geoconsent-agent, geoconsent-settings)."""
