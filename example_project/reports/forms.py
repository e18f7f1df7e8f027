from django import forms

from .models import Report


class ReportForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Report
        fields = ("title", "seconds")
        help_texts = {
            "seconds": "How long the build takes (a title containing 'fail' fails).",
        }

    def clean_seconds(self) -> int:
        seconds = int(self.cleaned_data["seconds"])
        if not 1 <= seconds <= 120:
            raise forms.ValidationError("Between 1 and 120 seconds.")
        return seconds
